//! The draw's promises, judged from what it published: the seed is the
//! one committed to at the sale's creation, the entries are the frozen set
//! (its digest, every entry a buyer was told of among them), their order is
//! the documented function of the seed, and within entries that asked for
//! the same thing a later one never won where an earlier one did not.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use stockade_core::draw::{Seed, draw_order, entry_digest};

use crate::crowd::get;
use crate::oracle::Violation;
use crate::world::Gateway;

/// Judges the draw of `sale` as the first instance up publishes it.
/// `commitment` is the seed's commitment from the sale's creation,
/// `entered` every entry id an answer named to a buyer.
pub async fn judge(
    gateway: &Gateway,
    sale: &str,
    commitment: &str,
    entered: &[String],
) -> Vec<Violation> {
    let uri = format!("/v1/sales/{sale}/draw?limit=10000");
    for i in 0..gateway.instances() {
        if let Some((200, body)) = gateway.call(i, get(&uri)).await {
            return published(&body, commitment, entered);
        }
    }
    vec![format!("no instance answered GET {uri} at the end")]
}

/// The checks of one published draw.
pub fn published(body: &Value, commitment: &str, entered: &[String]) -> Vec<Violation> {
    let mut bad = Vec::new();
    let state = body["state"].as_str().unwrap_or_default();
    if !matches!(state, "drawn" | "settled") {
        bad.push(format!("the draw is {state:?} at the end, never drawn"));
        return bad;
    }
    let order = body["order"].as_array().cloned().unwrap_or_default();
    let ids: Vec<&str> = order
        .iter()
        .map(|e| e["entry_id"].as_str().unwrap_or_default())
        .collect();
    match body["seed"].as_str().map(Seed::from_hex) {
        Some(Ok(seed)) => {
            if !seed.matches(commitment) {
                bad.push(format!(
                    "the published seed is not the one committed to ({commitment})"
                ));
            }
            match draw_order(&seed, &ids) {
                Ok(expected) if expected == ids => {}
                Ok(_) => bad.push("the published order is not the seed's order".into()),
                Err(e) => bad.push(format!("the published entries: {e}")),
            }
        }
        _ => bad.push(format!(
            "the published seed is missing or unreadable: {}",
            body["seed"]
        )),
    }
    if body["entry_digest"].as_str() != Some(entry_digest(&ids).as_str()) {
        bad.push("the entry digest is not the published entries'".into());
    }
    if body["entry_count"].as_u64() != Some(ids.len() as u64) {
        bad.push(format!(
            "entry_count {} but {} entries published",
            body["entry_count"],
            ids.len()
        ));
    }
    let set: BTreeSet<&str> = ids.iter().copied().collect();
    for entry in entered {
        if !set.contains(entry.as_str()) {
            bad.push(format!("entry {entry} was answered but is not in the draw"));
        }
    }
    bad.extend(in_order(&order));
    bad
}

/// Among entries that asked for the same items in the same tier, the draw
/// gave orders first to last: none won after one that did not.
fn in_order(order: &[Value]) -> Vec<Violation> {
    let mut missed: BTreeMap<String, &str> = BTreeMap::new();
    let mut bad = Vec::new();
    for entry in order {
        let asked = format!("{} {}", entry["tier"], entry["items"]);
        let id = entry["entry_id"].as_str().unwrap_or_default();
        if entry["drawn_result"] == "won" {
            if let Some(before) = missed.get(&asked) {
                bad.push(format!(
                    "entry {id} won {asked} after entry {before}, earlier in the order, did not"
                ));
            }
        } else {
            missed.entry(asked).or_insert(id);
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn drawn(results: &[&str]) -> Value {
        let seed = Seed::from_bytes([7; 32]);
        let ids: Vec<String> = (0..results.len()).map(|i| format!("e{i}")).collect();
        let order = draw_order(&seed, &ids).unwrap();
        json!({
            "state": "drawn",
            "seed": seed.to_hex(),
            "entry_digest": entry_digest(&order),
            "entry_count": order.len(),
            "order": order.iter().zip(results).map(|(id, result)| json!({
                "entry_id": id,
                "items": [{"sku": "a", "quantity": 1}],
                "tier": null,
                "drawn_result": result,
            })).collect::<Vec<_>>(),
        })
    }

    fn commitment() -> String {
        Seed::from_bytes([7; 32]).commitment()
    }

    #[test]
    fn a_draw_as_documented_passes() {
        let body = drawn(&["won", "won", "waitlisted", "waitlisted"]);
        assert_eq!(
            published(&body, &commitment(), &["e1".into()]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_later_entry_winning_what_an_earlier_missed_is_reported() {
        let body = drawn(&["won", "waitlisted", "won"]);
        let found = published(&body, &commitment(), &[]);
        assert!(found.iter().any(|v| v.contains("won")), "{found:?}");
    }

    #[test]
    fn another_seed_an_order_shuffled_or_an_entry_left_out_is_reported() {
        let mut body = drawn(&["won", "won", "waitlisted"]);
        let other = Seed::from_bytes([8; 32]).commitment();
        assert!(!published(&body, &other, &[]).is_empty());
        assert!(!published(&body, &commitment(), &["e9".into()]).is_empty());
        body["order"].as_array_mut().unwrap().swap(0, 2);
        let found = published(&body, &commitment(), &[]);
        assert!(
            found.iter().any(|v| v.contains("not the seed's order")),
            "{found:?}"
        );
    }
}
