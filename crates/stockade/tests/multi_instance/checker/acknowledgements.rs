//! Invariant 3 from the answers: the store indexed by order id, and each
//! acknowledgement a client was given matched against it.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::listing;
use crate::evidence::StoreOrder;
use crate::history::{Answer, Purchase, show_items};

/// The store by order id; an order listed twice is reported (it would be
/// counted twice).
pub(super) fn index_store<'a>(
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
pub(super) fn lost_acknowledgement(
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
    if let Some(asked) = &request.items {
        let (mut asked, mut has) = (asked.clone(), order.items.clone());
        asked.sort_unstable();
        has.sort_unstable();
        if asked != has {
            return Some(format!(
                "{who} names order {order_id}, which the store has with items [{}]",
                show_items(&order.items)
            ));
        }
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

/// The order an answer says exists or will exist: 201, 200, 202, and
/// errors that carry the id of an order kept for a later commit. An
/// `order_failed` answer names an order that was never recorded.
/// Whether the answer gave the client an order id to hold on to: a 200 or
/// 201, a 202 `pending`, or a 503 that names the order (the store was
/// unavailable after the engine accepted it). Every such order must end
/// committed (invariant 3).
pub(super) fn names_to_client(answer: &Answer) -> bool {
    match answer.status() {
        Some(200..=202) => true,
        Some(503) => answer.order_id().is_some(),
        _ => false,
    }
}

pub(super) fn names_order(answer: &Answer) -> Option<&str> {
    match answer.status()? {
        200..=299 => answer.order_id(),
        _ if answer.code() == Some("order_failed") => None,
        _ => answer.order_id(),
    }
}

/// A purchase in words: `201 on instance 1 for buyer u7 ×2 (key key-7)`,
/// with its items if it named any: `×2 [a×1+b×1]`.
fn who(purchase: &Purchase) -> String {
    let request = &purchase.request;
    let key = request
        .key
        .as_deref()
        .map_or_else(String::new, |k| format!(" (key {k})"));
    let items = request
        .items
        .as_deref()
        .map_or_else(String::new, |i| format!(" [{}]", show_items(i)));
    format!(
        "{} on instance {} for buyer {} ×{}{items}{key}",
        purchase.answer.label(),
        request.instance,
        request.buyer,
        request.quantity
    )
}
