//! Invariant 4: every idempotency key names one order, and its replays
//! agree with it.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::acknowledgements::names_order;
use crate::evidence::StoreOrder;
use crate::history::Purchase;

/// Invariant 4: per (buyer, key), every answer that names an order names
/// the same one, a repeat of the same purchase (quantity and items) is
/// never "reused", an order the store has is never denied
/// (`order_failed`); and a buyer who only ever sent one key has at most
/// one order in the store, the one the answers name.
pub(super) fn idempotency(history: &[Purchase], store: &[StoreOrder]) -> Vec<String> {
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
        let asked: HashSet<_> = purchases
            .iter()
            .map(|p| (p.request.quantity, &p.request.items))
            .collect();
        let reused = purchases
            .iter()
            .filter(|p| p.answer.code() == Some("idempotency_key_reused"))
            .count();
        if asked.len() == 1 && reused > 0 {
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
