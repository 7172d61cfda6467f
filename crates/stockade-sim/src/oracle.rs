//! The oracle: what the README promises, judged at the end of a run from
//! the history (what buyers were told) and the store (what is true).

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};
use stockade_core::{OrderId, OrderStatus, SaleId};
use stockade_store::{OrderStore, Stored};

use crate::crowd::REFUSALS;
use crate::history::History;
use crate::scenario::Sale;

/// A broken promise, said plainly.
pub type Violation = String;

/// What the oracle read and judged.
#[derive(Debug, Default)]
pub struct Verdict {
    /// The broken promises.
    pub violations: Vec<Violation>,
    /// The status of each order the store holds, as read (`None` if the
    /// store could not be read).
    pub statuses: Option<Vec<OrderStatus>>,
}

/// How long after its `expires_at` a hold may still be held: the
/// documented second, and the instances' clock offsets.
const HOLD_BOUND_MS: i64 = 1_000 + crate::scenario::MAX_OFFSET_MS;

/// Judges the run: `sale` as specified, `limits` each buyer's limit (by
/// their tier), `history` as the buyers saw it, `store` as it ends at
/// `now` (true time), `remaining` the sale's `remaining` of each SKU as
/// the service answered at the end.
pub async fn judge(
    sale: &Sale,
    limits: &BTreeMap<String, u32>,
    history: &History,
    (store, now): (&OrderStore, DateTime<Utc>),
    remaining: &BTreeMap<String, i64>,
) -> Verdict {
    let mut verdict = Verdict::default();
    let mut bad = |v: String| verdict.violations.push(v);
    for unexpected in history.unexpected_answers() {
        bad(format!("an answer the API never gives: {unexpected}"));
    }
    let sale_id = match SaleId::new(sale.id.clone()) {
        Ok(id) => id,
        Err(e) => {
            bad(format!("the sale id {} does not parse: {e}", sale.id));
            return verdict;
        }
    };
    let orders = match all_orders(store, &sale_id).await {
        Ok(orders) => orders,
        Err(e) => {
            bad(format!("cannot read the store's orders: {e}"));
            return verdict;
        }
    };
    // Stock: what is held or confirmed never exceeds a SKU's stock, and the
    // service's remaining is the rest.
    let mut taken: BTreeMap<&str, i64> = BTreeMap::new();
    let mut by_buyer: BTreeMap<&str, u32> = BTreeMap::new();
    let mut by_buyer_sku: BTreeMap<(&str, &str), u32> = BTreeMap::new();
    let mut by_key: BTreeMap<(&str, &str), BTreeSet<String>> = BTreeMap::new();
    for order in &orders {
        if let Some(key) = &order.idempotency_key {
            by_key
                .entry((order.user_id.as_str(), key.as_str()))
                .or_default()
                .insert(order.id.to_string());
        }
        if !order.status.holds_stock() {
            continue;
        }
        *by_buyer.entry(order.user_id.as_str()).or_default() += order.quantity;
        for item in &order.items {
            *taken.entry(item.sku.as_str()).or_default() += i64::from(item.quantity);
            *by_buyer_sku
                .entry((order.user_id.as_str(), item.sku.as_str()))
                .or_default() += item.quantity;
        }
    }
    for sku in &sale.skus {
        let taken = taken.get(sku.id.as_str()).copied().unwrap_or_default();
        if taken > i64::from(sku.stock) {
            bad(format!(
                "SKU {} oversold: {taken} held or confirmed of {}",
                sku.id, sku.stock
            ));
        }
        match remaining.get(&sku.id) {
            Some(left) if *left + taken != i64::from(sku.stock) || *left < 0 => bad(format!(
                "SKU {}: remaining {left} + held or confirmed {taken} is not its stock {}",
                sku.id, sku.stock
            )),
            None => bad(format!("SKU {} is missing from the sale's answer", sku.id)),
            Some(_) => {}
        }
    }
    // Reserves: kept for their tiers until the release.
    if let Some(broken) = crate::reserves::kept(sale, &orders) {
        bad(broken);
    }
    for short in crate::stock_refusals::wrongful_shorts(sale, &history.judged_answers()) {
        bad(short);
    }
    // Limits: a buyer's live items never exceed their limit (their
    // tier's, or the sale's), nor of one SKU its cap.
    for (user, items) in &by_buyer {
        let limit = limits.get(*user).copied().unwrap_or(sale.per_user_limit);
        if *items > limit {
            bad(format!(
                "buyer {user} holds {items} items, over their limit {limit}"
            ));
        }
    }
    if let Some(cap) = sale.per_sku_limit {
        for ((user, sku), items) in &by_buyer_sku {
            if *items > cap {
                bad(format!(
                    "buyer {user} holds {items} of SKU {sku}, over its cap {cap}"
                ));
            }
        }
    }
    for ((user, key), ids) in &by_key {
        if ids.len() > 1 {
            bad(format!(
                "buyer {user} key {key} has {} orders: {ids:?}",
                ids.len()
            ));
        }
    }
    // Every order named to a buyer ends in the store, under the key it was
    // named for; a 201 or 200 only for a committed one.
    let named = history.named_orders();
    let mut named_by_key: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for n in &named {
        if !n.key.is_empty() {
            named_by_key
                .entry((n.user.as_str(), n.key.as_str()))
                .or_default()
                .insert(n.order.as_str());
        }
        let Ok(id) = n.order.parse::<OrderId>() else {
            bad(format!(
                "{} key {}: answer {} named an order id that does not parse: {:?}",
                n.user, n.key, n.status, n.order
            ));
            continue;
        };
        match store.stored(id).await {
            Ok(Some(Stored::Order(order))) => {
                if order.user_id.as_str() != n.user {
                    bad(format!(
                        "order {id} named to {} belongs to {}",
                        n.user, order.user_id
                    ));
                }
            }
            Ok(Some(Stored::Void)) if n.status == 202 => {}
            Ok(Some(Stored::Void)) => bad(format!(
                "{} key {}: answered {} for order {id}, which the store refused",
                n.user, n.key, n.status
            )),
            // Pending (202, or 503 naming it): Redis and the instance
            // holding it both lost it (seed 0x5eed03d8).
            Ok(None)
                if matches!(n.status, 202 | 503) && history.pending_order_may_be_lost(n.at_ms) => {}
            Ok(None) => bad(format!(
                "{} key {}: answered {} for order {id}, which the store never committed",
                n.user, n.key, n.status
            )),
            Err(e) => bad(format!("cannot read order {id}: {e}")),
        }
    }
    for ((user, key), ids) in &named_by_key {
        if ids.len() > 1 {
            bad(format!(
                "buyer {user} key {key} was named {} different orders: {ids:?}",
                ids.len()
            ));
        }
    }
    // A refusal by the sale ("nothing was sold") to a keyed purchase never
    // stands beside an order the store has under that key: a repeat of the
    // key must find its order (or say to retry), not judge it anew.
    for answer in history.judged_answers() {
        if answer.key.is_empty() || !REFUSALS.contains(&answer.code.as_str()) {
            continue;
        }
        if let Some(ids) = by_key.get(&(answer.user.as_str(), answer.key.as_str())) {
            bad(format!(
                "{} key {}: answered {} {} (nothing sold), but the store has {ids:?} under that key",
                answer.user, answer.key, answer.status, answer.code
            ));
        }
    }
    // An order answered `order_failed` ("nothing was sold") never commits.
    for order in history.failed_orders() {
        let Ok(id) = order.parse::<OrderId>() else {
            continue;
        };
        if let Ok(Some(Stored::Order(found))) = store.stored(id).await {
            bad(format!(
                "order {id} was answered order_failed (nothing sold) but the store has it {:?}",
                found.status
            ));
        }
    }
    // A confirm answered `confirmed` stays confirmed unless cancelled.
    let cancelled: BTreeSet<String> = history.cancelled_orders().into_iter().collect();
    let statuses: BTreeMap<String, OrderStatus> = orders
        .iter()
        .map(|o| (o.id.to_string(), o.status))
        .collect();
    for order in history.confirmed_orders() {
        let status = statuses.get(&order);
        if status != Some(&OrderStatus::Confirmed) && !cancelled.contains(&order) {
            bad(format!(
                "order {order} was answered confirmed but ends {status:?}"
            ));
        }
    }
    // Holds end: none is still held once its deadline and the bound passed
    // (a draw's roll-down may have made one shortly before the end).
    for order in &orders {
        let overdue = order
            .expires_at
            .is_none_or(|at| at + TimeDelta::milliseconds(HOLD_BOUND_MS) < now);
        if order.status == OrderStatus::Held && overdue {
            bad(format!(
                "order {} is still held at the end (expires_at {:?})",
                order.id, order.expires_at
            ));
        }
    }
    // The engine and the store's arbiter agree where no fault explains
    // otherwise.
    verdict
        .violations
        .extend(crate::agreement::engine_and_arbiter(history));
    verdict.statuses = Some(orders.iter().map(|o| o.status).collect());
    verdict
}

/// Every order of `sale` the store has (none it refused).
pub async fn all_orders(
    store: &OrderStore,
    sale: &SaleId,
) -> Result<Vec<stockade_core::Order>, stockade_store::StoreError> {
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = store.orders_of_sale(sale, after, 1_000).await?;
        let Some(last) = page.last() else {
            return Ok(all);
        };
        after = Some(last.id);
        all.extend(page);
    }
}

/// The sale's window as each buyer's answers were judged: `not_started`
/// only while the answering instance's clock was before the buyer's start
/// (their tier's, or the sale's), `ended` only once it was past the end,
/// and no order before the start or after the end.
pub fn windows(
    sale: &Sale,
    tiers: &BTreeMap<String, Option<String>>,
    answers: &[crate::history::Judged],
) -> Vec<Violation> {
    let at = |ms: u64| crate::clock::at(ms).timestamp_millis();
    let mut violations = Vec::new();
    for answer in answers {
        let tier = tiers.get(&answer.user).cloned().flatten();
        let early = tier
            .as_deref()
            .and_then(|name| sale.tiers.iter().find(|t| t.name == name))
            .map_or(0, |t| t.early_ms);
        let starts = at(sale.starts_ms.saturating_sub(early));
        let ends = sale.ends_ms.map(at);
        // A new order: 201, or 202 to a key's first sending. A 200 replays
        // an order its key named before, made when that first answer was
        // (which the network may have lost: `--lost-answers`), and so may a
        // 202 to a key sent again (the order is still being committed).
        let sold = answer.status == 201 || (answer.status == 202 && !answer.repeat);
        let wrong = match answer.code.as_str() {
            "not_started" if answer.sent_ms >= starts => {
                Some(format!("not_started, though its start {starts} had passed"))
            }
            "ended" if ends.is_none_or(|ends| answer.answered_ms < ends) => {
                Some(format!("ended, though the end {ends:?} had not come"))
            }
            _ if sold && answer.answered_ms < starts => {
                Some(format!("an order before its start {starts}"))
            }
            _ if sold && ends.is_some_and(|ends| answer.sent_ms >= ends) => {
                Some(format!("an order after the end {ends:?}"))
            }
            _ => None,
        };
        if let Some(wrong) = wrong {
            violations.push(format!(
                "buyer {} (tier {tier:?}) was answered {} {} between {} and {} on the instance's clock: {wrong}",
                answer.user, answer.status, answer.code, answer.sent_ms, answer.answered_ms
            ));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Judged;
    use crate::scenario::{Sku, Tier};

    fn sale() -> Sale {
        Sale {
            id: "drop".into(),
            skus: vec![Sku {
                id: "s0".into(),
                stock: 10,
            }],
            per_user_limit: 1,
            per_sku_limit: None,
            hold_seconds: None,
            starts_ms: 10_000,
            ends_ms: Some(20_000),
            tiers: vec![Tier {
                name: "members".into(),
                reserved: 5,
                per_user_limit: 2,
                early_ms: 4_000,
            }],
            release_reserved_ms: None,
            draw_close_ms: None,
        }
    }

    fn answer(user: &str, status: u16, code: &str, at_ms: i64) -> Judged {
        let at = crate::clock::epoch().timestamp_millis() + at_ms;
        Judged {
            user: user.into(),
            key: String::new(),
            status,
            code: code.into(),
            sent_ms: at,
            answered_ms: at,
            instance: 0,
            at_ms: (0, 0),
            repeat: false,
            remaining: None,
        }
    }

    #[test]
    fn a_member_turned_away_in_their_tiers_window_is_a_violation() {
        let tiers = BTreeMap::from([
            ("m".to_owned(), Some("members".to_owned())),
            ("p".to_owned(), None),
        ]);
        let right = [
            answer("m", 409, "not_started", 5_999),
            answer("p", 409, "not_started", 9_999),
            answer("m", 201, "", 6_000),
            answer("p", 409, "ended", 20_000),
        ];
        assert_eq!(windows(&sale(), &tiers, &right), Vec::<String>::new());
        // A replay after the end names an order made before it.
        let replay = answer("p", 200, "", 20_000);
        let pending = Judged {
            repeat: true,
            ..answer("p", 202, "", 20_000)
        };
        assert!(windows(&sale(), &tiers, &[replay, pending]).is_empty());
        let new = answer("p", 202, "", 20_000);
        assert_eq!(windows(&sale(), &tiers, &[new]).len(), 1);
        for wrong in [
            answer("m", 409, "not_started", 6_000),
            answer("p", 201, "", 9_999),
            answer("p", 409, "ended", 19_999),
            answer("m", 201, "", 20_000),
        ] {
            let found = windows(&sale(), &tiers, std::slice::from_ref(&wrong));
            assert_eq!(found.len(), 1, "{wrong:?} is wrong: {found:?}");
        }
    }
}
