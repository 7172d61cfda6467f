//! The history checker: docs/design.md's invariants 1-5 judged from the
//! recorded answers and the store's orders. A plain function over plain
//! data ([`check`]), unit-tested with hand-made bad histories in
//! `checker_tests.rs`.
//!
//! Payment holds are judged under the same numbers: a confirm answer the
//! store contradicts, or a confirmed order nobody paid for, is invariant 3
//! (what the client was told); a hold left `held` at the end, or an
//! `expired` counter above the store's expired orders (an expiry counted,
//! and its items returned, more than once), is invariant 5 (expired orders
//! returned, exactly once).
//!
//! A sale of several SKUs ([`check_with_skus`]) is judged per SKU too
//! (`skus`): invariant 1 for each SKU's stock, invariant 5 for each SKU
//! sold out in the store and in every instance's view. Every order's items
//! must add up to its quantity and name the sale's SKUs (invariant 1: else
//! its items are counted against no stock).

mod acknowledgements;
mod holds;
mod idempotency;
mod skus;

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use acknowledgements::{index_store, lost_acknowledgement, names_to_client};
use holds::{expiry_counted_once, payments, unsettled_holds};
use idempotency::idempotency;
use skus::{live_per_sku, oversold_skus, unaccounted_items, unsold_skus, wrong_sku_views};

use crate::evidence::{Evidence, SkuStock, StoreOrder};

/// Examples listed per violation; the rest are counted.
const EXAMPLES: usize = 10;

/// One broken invariant, with what broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// docs/design.md's number (1-5).
    pub invariant: u8,
    /// What was found, with buyers, orders and counts.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.invariant {
            1 => "no oversell",
            2 => "no over-limit",
            3 => "no lost acknowledgement",
            4 => "idempotency",
            5 => "no permanent undersell",
            _ => "?",
        };
        write!(f, "invariant {} ({name}): {}", self.invariant, self.message)
    }
}

/// Every violation of invariants 1-5 in `evidence` of a sale of one SKU,
/// all at once.
pub fn check(evidence: &Evidence) -> Vec<Violation> {
    check_with_skus(evidence, &[])
}

/// [`check`] for a sale of `skus` (empty: of one SKU, `default`).
pub fn check_with_skus(evidence: &Evidence, skus: &[SkuStock]) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut report =
        |invariant: u8, message: String| violations.push(Violation { invariant, message });
    let history = &evidence.history.purchases;
    let store = match &evidence.store {
        Ok(store) => store.as_slice(),
        Err(error) => {
            report(
                5,
                format!("never healed: the store's orders could not be read: {error}"),
            );
            &[]
        }
    };
    let by_id = index_store(store, &mut report);
    let terms = &evidence.terms;
    let holds = terms.hold_seconds.is_some();

    // 1. No oversell.
    let live: u64 = store
        .iter()
        .filter(|o| o.is_live())
        .map(|o| o.quantity)
        .sum();
    if live > terms.stock {
        let orders = store.iter().filter(|o| o.is_live()).count();
        report(
            1,
            format!(
                "sale {}: {orders} live orders hold {live} items of a stock of {}: oversold by {}",
                terms.sale,
                terms.stock,
                live - terms.stock
            ),
        );
    }

    let skus = terms.sku_stocks(skus);
    let several_skus = skus.len() > 1;
    let unaccounted = unaccounted_items(store, &skus);
    if !unaccounted.is_empty() {
        report(
            1,
            listing(
                &format!(
                    "sale {}: {} orders' items do not account for them",
                    terms.sale,
                    unaccounted.len()
                ),
                &unaccounted,
            ),
        );
    }
    let live_of_sku = live_per_sku(store, &skus);
    let oversold = oversold_skus(&live_of_sku, &skus);
    if several_skus && !oversold.is_empty() {
        report(
            1,
            listing(
                &format!("sale {}: {} SKUs oversold", terms.sale, oversold.len()),
                &oversold,
            ),
        );
    }

    // 2. No over-limit.
    let mut per_buyer: BTreeMap<&str, Vec<&StoreOrder>> = BTreeMap::new();
    for order in store.iter().filter(|o| o.is_live()) {
        per_buyer.entry(&order.user_id).or_default().push(order);
    }
    let over: Vec<String> = per_buyer
        .iter()
        .filter_map(|(buyer, orders)| {
            let held: u64 = orders.iter().map(|o| o.quantity).sum();
            (held > terms.per_user_limit).then(|| {
                let list: Vec<String> = orders
                    .iter()
                    .map(|o| format!("{} ×{}", o.order_id, o.quantity))
                    .collect();
                format!("buyer {buyer} holds {held} in [{}]", list.join(", "))
            })
        })
        .collect();
    if !over.is_empty() {
        report(
            2,
            listing(
                &format!(
                    "{} buyers hold more than the limit of {}",
                    over.len(),
                    terms.per_user_limit
                ),
                &over,
            ),
        );
    }

    // 3. No lost acknowledgement.
    let cancel_sent: HashSet<&str> = evidence
        .history
        .cancels
        .iter()
        .map(|c| c.order_id.as_str())
        .collect();
    let lost: Vec<String> = history
        .iter()
        .filter(|p| names_to_client(&p.answer))
        .filter_map(|p| lost_acknowledgement(p, &by_id, &cancel_sent, holds))
        .collect();
    let lost_cancels = evidence
        .history
        .cancels
        .iter()
        .filter(|c| c.answer.status() == Some(200))
        .filter_map(|c| {
            // A cancel is answered 200 with the order as it stands:
            // `cancelled`, or `expired` when its hold ran out first (the
            // items came back either way). The store must say the same.
            let told = c.answer.body()["status"]
                .as_str()
                .filter(|status| *status == "expired")
                .unwrap_or("cancelled");
            match by_id.get(c.order_id.as_str()) {
                Some(order) if order.status == told => None,
                found => Some(format!(
                    "cancel of {} answered 200 ({told}) on instance {}, but the store has it {}",
                    c.order_id,
                    c.instance,
                    found.map_or("nowhere", |o| o.status.as_str())
                )),
            }
        });
    let lost: Vec<String> = lost.into_iter().chain(lost_cancels).collect();
    if !lost.is_empty() {
        report(
            3,
            listing(
                &format!(
                    "{} acknowledgements (201, 202, 503 with an order id, 200 replays, cancels) do not match the store",
                    lost.len()
                ),
                &lost,
            ),
        );
    }

    // 3. Confirms (payments) and the store agree.
    let payments = payments(&evidence.history.confirms, store, &by_id, holds);
    if !payments.is_empty() {
        report(
            3,
            listing(
                &format!(
                    "{} confirms (payments) and orders do not match",
                    payments.len()
                ),
                &payments,
            ),
        );
    }

    // 4. Idempotency.
    let keyed = idempotency(history, store);
    if !keyed.is_empty() {
        report(
            4,
            listing(&format!("{} idempotency keys broken", keyed.len()), &keyed),
        );
    }

    // 5. No permanent undersell, once healed.
    let healing = &evidence.healing;
    for step in [
        &healing.ready,
        &healing.sold_out_everywhere,
        &healing.settled,
    ] {
        if let Err(error) = step {
            report(5, format!("never healed: {error}"));
        }
    }
    if evidence.store.is_ok() && live != terms.stock {
        report(
            5,
            format!(
                "after healing and selling out, live orders hold {live} items, not the stock of {}",
                terms.stock
            ),
        );
    }
    let unsold = unsold_skus(&live_of_sku, &skus);
    if evidence.store.is_ok() && several_skus && !unsold.is_empty() {
        report(
            5,
            listing(
                &format!(
                    "after healing and selling out, live orders do not hold the stock of {} SKUs",
                    unsold.len()
                ),
                &unsold,
            ),
        );
    }
    let unsettled = unsettled_holds(store, holds);
    if !unsettled.is_empty() {
        report(
            5,
            listing(
                &format!(
                    "{} orders neither confirmed nor returned after healing",
                    unsettled.len()
                ),
                &unsettled,
            ),
        );
    }
    if let Some(counters) = &evidence.expiry_counters {
        let expired = store.iter().filter(|o| o.status == "expired").count() as u64;
        for problem in expiry_counted_once(counters, expired) {
            report(5, problem);
        }
    }
    for (instance, view) in healing.sale_views.iter().enumerate() {
        let body = view.body();
        let (remaining, sold) = (body["remaining"].as_u64(), body["sold"].as_u64());
        if view.status() != Some(200) {
            report(
                5,
                format!(
                    "instance {instance}: GET /v1/sales/{} answered {} after healing",
                    terms.sale,
                    view.describe()
                ),
            );
        } else if remaining != Some(0) || sold != Some(terms.stock) {
            report(
                5,
                format!(
                    "instance {instance} reports remaining {} and sold {} after selling out \
                     (expected 0 and {})",
                    show(remaining),
                    show(sold),
                    terms.stock
                ),
            );
        }
        let wrong = wrong_sku_views(view, &skus);
        if view.status() == Some(200) && several_skus && !wrong.is_empty() {
            report(
                5,
                listing(
                    &format!(
                        "instance {instance} reports {} SKUs not sold out after selling out",
                        wrong.len()
                    ),
                    &wrong,
                ),
            );
        }
    }
    violations
}

/// A headline and the first examples, one per line.
fn listing(headline: &str, lines: &[String]) -> String {
    let mut out = headline.to_owned();
    for line in lines.iter().take(EXAMPLES) {
        out.push_str("\n      ");
        out.push_str(line);
    }
    if lines.len() > EXAMPLES {
        out.push_str(&format!("\n      ... and {} more", lines.len() - EXAMPLES));
    }
    out
}

fn show(value: Option<u64>) -> String {
    value.map_or_else(|| "(missing)".to_owned(), |v| v.to_string())
}
