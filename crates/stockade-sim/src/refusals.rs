//! A limit refusal is right: a buyer answered `limit_exceeded` held, with
//! what they asked for, more than their limit (their tier's, or the
//! sale's) or a SKU's cap. What they held then is at most every order
//! they ever had (held, confirmed, cancelled or expired: the store keeps
//! each one, and an engine counts an order from its acceptance until it
//! is released), so a buyer refused though even all of those and the ask
//! fit was refused by an engine out of line (a tier's limit read as the
//! sale's, a holding counted twice). A buyer with an order the store
//! refused is not judged: an engine counts such an order until it is
//! rebuilt, and the store has none of it. Nor is a buyer who never learned
//! how a purchase ended, in a run where Redis lost writes: the engine may
//! have taken it and counted it, then lost it before the store had it.
//!
//! Stock refusals are judged in [`crate::stock_refusals`], from the same
//! read of the store.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{History, Judged};
use crate::oracle::Violation;
use crate::scenario::Scenario;

/// What a buyer ever had, of every order the store has of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Had {
    /// Items in all.
    pub items: u32,
    /// Items of each SKU.
    pub of_sku: BTreeMap<String, u32>,
}

/// What the oracle knows of a buyer to judge their limit refusals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asker {
    /// Their limit (their tier's, or the sale's).
    pub limit: u32,
    /// What each of their purchases asks for: (SKU, quantity).
    pub asks: Vec<(String, u32)>,
}

/// Each `limit_exceeded` answer to a buyer who, with everything they ever
/// had and what they asked, was within their limit and every SKU's `cap`.
pub fn wrongful_limit_refusals(
    askers: &BTreeMap<String, Asker>,
    cap: Option<u32>,
    had: &BTreeMap<String, Had>,
    unjudged: &BTreeSet<String>,
    answers: &[Judged],
) -> Vec<Violation> {
    let nothing = Had::default();
    answers
        .iter()
        .filter(|a| a.code == "limit_exceeded" && !unjudged.contains(&a.user))
        .filter_map(|answer| {
            let asker = askers.get(&answer.user)?;
            let had = had.get(&answer.user).unwrap_or(&nothing);
            let asked: u32 = asker.asks.iter().map(|(_, q)| q).sum();
            let within_cap = asker.asks.iter().all(|(sku, q)| {
                cap.is_none_or(|cap| had.of_sku.get(sku).copied().unwrap_or_default() + q <= cap)
            });
            (had.items + asked <= asker.limit && within_cap).then(|| {
                format!(
                    "buyer {} was answered limit_exceeded asking {:?}, though every order they ever had holds {} items ({:?}) of their limit {} (SKU cap {cap:?})",
                    answer.user, asker.asks, had.items, had.of_sku, asker.limit
                )
            })
        })
        .collect()
}

/// The refusals of a run that nothing explains: `limit_exceeded` answers
/// judged against every order the store has of each buyer, stock refusals
/// against every order of the sale made by then.
pub(crate) async fn judge(
    scenario: &Scenario,
    store: &stockade_store::OrderStore,
    history: &History,
) -> Vec<Violation> {
    let sale = &scenario.sale;
    let Ok(id) = stockade_core::SaleId::new(sale.id.clone()) else {
        return Vec::new();
    };
    let orders = match crate::oracle::all_orders(store, &id).await {
        Ok(orders) => orders,
        Err(e) => return vec![format!("cannot read the store's orders: {e}")],
    };
    let mut had: BTreeMap<String, Had> = BTreeMap::new();
    for order in &orders {
        let had = had.entry(order.user_id.to_string()).or_default();
        had.items += order.quantity;
        for item in &order.items {
            *had.of_sku.entry(item.sku.to_string()).or_default() += item.quantity;
        }
    }
    let askers = scenario
        .buyers
        .iter()
        .map(|b| {
            let asks = b
                .items
                .iter()
                .map(|(sku, q)| (sale.skus[*sku].id.clone(), *q))
                .collect();
            let limit = sale.limit_of(b.tier.as_deref());
            (b.user.clone(), Asker { limit, asks })
        })
        .collect();
    let mut unjudged: BTreeSet<String> = history
        .voided_orders()
        .into_iter()
        .map(|v| v.user)
        .collect();
    // An engine may have taken a purchase whose buyer never learned its
    // outcome, and counted it against their limit until Redis lost it with
    // its outbox entry, before the store ever had it (seed 0x5eed00ba: a
    // keyless purchase whose reply Redis dropped, then a Redis loss).
    let lost_writes = history.redis_lost_writes();
    if lost_writes {
        unjudged.extend(history.uncertain_buyers());
    }
    let answers = history.judged_answers();
    let mut found = wrongful_limit_refusals(&askers, sale.per_sku_limit, &had, &unjudged, &answers);
    if !lost_writes {
        let voided: Vec<String> = history
            .voided_orders()
            .into_iter()
            .map(|v| v.user)
            .collect();
        let takes = crate::stock_refusals::Takes::of(scenario, &orders, &voided);
        let asks = askers
            .into_iter()
            .map(|(user, asker)| (user, asker.asks))
            .collect();
        let tiers = scenario
            .buyers
            .iter()
            .filter_map(|b| Some((b.user.clone(), sale.tier_index(b.tier.as_deref()?)?)))
            .collect();
        let slack = crate::stock_refusals::clock_slack_ms(scenario);
        found.extend(crate::stock_refusals::premature(
            sale, &takes, &asks, &tiers, slack, &answers,
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(user: &str) -> Judged {
        Judged {
            user: user.into(),
            key: String::new(),
            status: 409,
            code: "limit_exceeded".into(),
            sent_ms: 0,
            answered_ms: 0,
            instance: 0,
            at_ms: (0, 0),
            repeat: false,
            remaining: None,
        }
    }

    #[test]
    fn a_refusal_within_the_limit_and_the_cap_is_reported() {
        let askers = BTreeMap::from([
            (
                "m".to_owned(),
                Asker {
                    limit: 4,
                    asks: vec![("s0".into(), 2)],
                },
            ),
            (
                "p".to_owned(),
                Asker {
                    limit: 2,
                    asks: vec![("s0".into(), 2)],
                },
            ),
        ]);
        let had = BTreeMap::from([(
            "p".to_owned(),
            Had {
                items: 1,
                of_sku: BTreeMap::from([("s0".to_owned(), 1)]),
            },
        )]);
        let none = BTreeSet::new();
        // A member (limit 4) holding nothing, refused: wrong. A buyer at 1
        // of 2 asking 2: right.
        let found =
            wrongful_limit_refusals(&askers, None, &had, &none, &[refused("m"), refused("p")]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("buyer m was answered limit_exceeded"));
        // The SKU's cap of 1 explains the member's refusal.
        assert!(wrongful_limit_refusals(&askers, Some(1), &had, &none, &[refused("m")]).is_empty());
        // A buyer with an order the store refused is not judged.
        let voided = BTreeSet::from(["m".to_owned()]);
        assert!(wrongful_limit_refusals(&askers, None, &had, &voided, &[refused("m")]).is_empty());
    }
}
