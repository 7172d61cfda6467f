//! The history checker: DESIGN.md's invariants 1-5 judged from the
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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use crate::evidence::{Evidence, ExpiryCounters, StoreOrder};
use crate::history::{Answer, Confirm, Purchase};

/// Examples listed per violation; the rest are counted.
const EXAMPLES: usize = 10;

/// One broken invariant, with what broke it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// DESIGN.md's number (1-5).
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

/// Every violation of invariants 1-5 in `evidence`, all at once.
pub fn check(evidence: &Evidence) -> Vec<Violation> {
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
    }
    violations
}

/// The store by order id; an order listed twice is reported (it would be
/// counted twice).
fn index_store<'a>(
    store: &'a [StoreOrder],
    report: &mut impl FnMut(u8, String),
) -> HashMap<&'a str, &'a StoreOrder> {
    let mut by_id = HashMap::new();
    let mut twice = BTreeSet::new();
    for order in store {
        if by_id.insert(order.order_id.as_str(), order).is_some() {
            twice.insert(order.order_id.as_str());
        }
    }
    if !twice.is_empty() {
        let twice: Vec<String> = twice.into_iter().map(str::to_owned).collect();
        report(
            1,
            listing("orders listed more than once by the store", &twice),
        );
    }
    by_id
}

/// Why an acknowledged purchase is not a confirmed order in the store, if
/// it is not. In a sale with holds, the order may also be `expired` (or
/// still `held`, which [`unsettled_holds`] reports): whether it should have
/// been confirmed is judged by [`payments`].
fn lost_acknowledgement(
    purchase: &Purchase,
    store: &HashMap<&str, &StoreOrder>,
    cancel_sent: &HashSet<&str>,
    holds: bool,
) -> Option<String> {
    let who = who(purchase);
    let Some(order_id) = purchase.answer.order_id() else {
        return Some(format!("{who} names no order: {}", purchase.answer.body()));
    };
    let request = &purchase.request;
    let Some(order) = store.get(order_id) else {
        return Some(format!(
            "{who} names order {order_id}, which the store does not have"
        ));
    };
    if order.user_id != request.buyer || order.quantity != u64::from(request.quantity) {
        return Some(format!(
            "{who} names order {order_id}, which the store has for buyer {} ×{}",
            order.user_id, order.quantity
        ));
    }
    let cancelled_by_us = order.status == "cancelled" && cancel_sent.contains(order_id);
    let unpaid_hold = holds && matches!(order.status.as_str(), "expired" | "held");
    if order.status != "confirmed" && !cancelled_by_us && !unpaid_hold {
        return Some(format!(
            "{who} names order {order_id}, which is {} in the store",
            order.status
        ));
    }
    None
}

/// Confirm answers against the store: a 200 means the order is
/// `confirmed`, a 409 `hold_expired` that it is `expired`; and in a sale
/// with holds, a `confirmed` order had at least one confirm sent (nobody
/// else may confirm it).
fn payments(
    confirms: &[Confirm],
    store: &[StoreOrder],
    by_id: &HashMap<&str, &StoreOrder>,
    holds: bool,
) -> Vec<String> {
    let mut lines = Vec::new();
    for confirm in confirms {
        let expected = match (confirm.answer.status(), confirm.answer.code()) {
            (Some(200), _) => "confirmed",
            (Some(409), Some("hold_expired")) => "expired",
            _ => continue,
        };
        let found = by_id.get(confirm.order_id.as_str());
        if found.is_none_or(|o| o.status != expected) {
            lines.push(format!(
                "confirm of {} answered {} on instance {}, but the store has it {}",
                confirm.order_id,
                confirm.answer.label(),
                confirm.instance,
                found.map_or("nowhere", |o| o.status.as_str())
            ));
        }
    }
    if holds {
        let paid: HashSet<&str> = confirms.iter().map(|c| c.order_id.as_str()).collect();
        lines.extend(
            store
                .iter()
                .filter(|o| o.status == "confirmed" && !paid.contains(o.order_id.as_str()))
                .map(|o| {
                    format!(
                        "order {} of buyer {} is confirmed, but no confirm was ever sent for it",
                        o.order_id, o.user_id
                    )
                }),
        );
    }
    lines
}

/// Orders that should have been settled by now: any order still `held`,
/// and `expired` orders of a sale without holds.
fn unsettled_holds(store: &[StoreOrder], holds: bool) -> Vec<String> {
    store
        .iter()
        .filter(|o| o.status == "held" || !holds && o.status == "expired")
        .map(|o| {
            format!(
                "order {} of buyer {} ×{} is {}{}",
                o.order_id,
                o.user_id,
                o.quantity,
                o.status,
                if holds {
                    ""
                } else {
                    " in a sale without holds"
                }
            )
        })
        .collect()
}

/// The instances' `expired` counters against the store's `expired`
/// orders. Each expiry is counted by the one instance whose transaction
/// made it; a killed instance's counts since its last scrape are lost, so
/// the sum may fall short of the store but never exceed it (that would be
/// an expiry, and its items' return, done twice). Every instance must
/// answer `/metrics` after healing.
fn expiry_counted_once(counters: &ExpiryCounters, expired: u64) -> Vec<String> {
    let mut problems = Vec::new();
    let mut counted = 0;
    let mut parts = Vec::new();
    for (instance, count) in counters.after_healing.iter().enumerate() {
        match count {
            Ok(n) => {
                counted += n;
                parts.push(format!("instance {instance}: {n}"));
            }
            Err(error) => problems.push(format!(
                "never healed: the expired counter of instance {instance} could not be read: {error}"
            )),
        }
    }
    for (instance, count) in &counters.before_kills {
        if let Ok(n) = count {
            counted += n;
            parts.push(format!("instance {instance} before it was killed: {n}"));
        }
    }
    if counted > expired {
        problems.push(format!(
            "the instances counted {counted} expiries ({}), but the store has {expired} \
             expired orders: some hold was expired more than once",
            parts.join(", ")
        ));
    }
    problems
}

/// Invariant 4: per (buyer, key), every answer that names an order names
/// the same one, a repeat of the same purchase is never "reused", an
/// order the store has is never denied (`order_failed`); and a
/// buyer who only ever sent one key has at most one order in the store,
/// the one the answers name.
fn idempotency(history: &[Purchase], store: &[StoreOrder]) -> Vec<String> {
    let mut lines = Vec::new();
    let mut by_key: BTreeMap<(&str, &str), Vec<&Purchase>> = BTreeMap::new();
    let mut keys_of_buyer: HashMap<&str, HashSet<Option<&str>>> = HashMap::new();
    for purchase in history {
        let request = &purchase.request;
        keys_of_buyer
            .entry(&request.buyer)
            .or_default()
            .insert(request.key.as_deref());
        if let Some(key) = &request.key {
            by_key
                .entry((&request.buyer, key))
                .or_default()
                .push(purchase);
        }
    }
    let mut orders_of_buyer: HashMap<&str, Vec<&StoreOrder>> = HashMap::new();
    for order in store {
        orders_of_buyer
            .entry(&order.user_id)
            .or_default()
            .push(order);
    }
    for ((buyer, key), purchases) in by_key {
        let mut named: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for purchase in &purchases {
            if let Some(order_id) = names_order(&purchase.answer) {
                named.entry(order_id).or_default().push(format!(
                    "{} on instance {}",
                    purchase.answer.label(),
                    purchase.request.instance
                ));
            }
        }
        if named.len() > 1 {
            let list: Vec<String> = named
                .iter()
                .map(|(id, by)| format!("{id} ({})", by.join(", ")))
                .collect();
            lines.push(format!(
                "buyer {buyer} key {key}: answers name {} different orders: {}",
                named.len(),
                list.join("; ")
            ));
        }
        // "Not recorded, nothing was sold; retry with a new key" about an
        // order that is in the store: the buyer is told to buy twice.
        for purchase in &purchases {
            if purchase.answer.code() != Some("order_failed") {
                continue;
            }
            let Some(order_id) = purchase.answer.order_id() else {
                continue;
            };
            if let Some(order) = store.iter().find(|o| o.order_id == order_id) {
                lines.push(format!(
                    "buyer {buyer} key {key}: a repeat on instance {} was answered 409 \
                     order_failed (\"not recorded, nothing was sold\") for order {order_id}, \
                     which the store has {}",
                    purchase.request.instance, order.status
                ));
            }
        }
        let quantities: HashSet<u32> = purchases.iter().map(|p| p.request.quantity).collect();
        let reused = purchases
            .iter()
            .filter(|p| p.answer.code() == Some("idempotency_key_reused"))
            .count();
        if quantities.len() == 1 && reused > 0 {
            lines.push(format!(
                "buyer {buyer} key {key}: the same purchase repeated was answered \
                 422 idempotency_key_reused {reused} times"
            ));
        }
        if keys_of_buyer[buyer].len() == 1 {
            let orders = orders_of_buyer.get(buyer).map_or(&[][..], Vec::as_slice);
            let ids: Vec<&str> = orders.iter().map(|o| o.order_id.as_str()).collect();
            if orders.len() > 1 {
                lines.push(format!(
                    "buyer {buyer} only ever sent key {key}, yet the store has {} orders for them: {}",
                    orders.len(),
                    ids.join(", ")
                ));
            } else if let (Some(id), false) = (ids.first(), named.is_empty())
                && !named.contains_key(id)
            {
                let answered: Vec<&str> = named.keys().copied().collect();
                lines.push(format!(
                    "buyer {buyer} key {key}: answers name {}, but the store's order is {id}",
                    answered.join(", ")
                ));
            }
        }
    }
    lines
}

/// The order an answer says exists or will exist: 201, 200, 202, and
/// errors that carry the id of an order kept for a later commit. An
/// `order_failed` answer names an order that was never recorded.
/// Whether the answer gave the client an order id to hold on to: a 200 or
/// 201, a 202 `pending`, or a 503 that names the order (the store was
/// unavailable after the engine accepted it). Every such order must end
/// committed (invariant 3).
fn names_to_client(answer: &Answer) -> bool {
    match answer.status() {
        Some(200..=202) => true,
        Some(503) => answer.order_id().is_some(),
        _ => false,
    }
}

fn names_order(answer: &Answer) -> Option<&str> {
    match answer.status()? {
        200..=299 => answer.order_id(),
        _ if answer.code() == Some("order_failed") => None,
        _ => answer.order_id(),
    }
}

/// A purchase in words: `201 on instance 1 for buyer u7 ×2 (key key-7)`.
fn who(purchase: &Purchase) -> String {
    let request = &purchase.request;
    let key = request
        .key
        .as_deref()
        .map_or_else(String::new, |k| format!(" (key {k})"));
    format!(
        "{} on instance {} for buyer {} ×{}{key}",
        purchase.answer.label(),
        request.instance,
        request.buyer,
        request.quantity
    )
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
