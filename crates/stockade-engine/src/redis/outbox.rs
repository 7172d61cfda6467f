//! Which outbox entry holds which order, as this process knows it.
//!
//! A purchase batch appends ONE stream entry carrying all its accepted
//! orders, so acknowledging an order cannot delete "its" entry: the entry
//! goes only once every order in it is decided (committed or void in the
//! store) or released. Keeping that count in Redis would cost a write per
//! order; it lives here instead, in two indexes of the same shape:
//! - the engine's own entries, filled by the batches this process sent and
//!   emptied as it acknowledges their orders;
//! - other processes' entries as of this process's last read of each
//!   outbox (recovery reads the outbox before it acknowledges what it
//!   found, so the entries it acknowledges are known). Each read replaces
//!   that view ([`OutboxIndex::keep_only`]): entries that left the stream
//!   (acknowledged by their writer) are forgotten, so the view never holds
//!   more than the stream does.
//!
//! Losing an index (a crash) loses nothing: the entries stay in the
//! stream until some instance's recovery reads, commits and acknowledges
//! them. Acknowledging an order twice is harmless: its first
//! acknowledgement takes it out of the index.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use dashmap::DashMap;
use stockade_core::{OrderId, SaleId};

/// One outbox stream: a sale and its shard (0 for an unsharded sale), since
/// each shard of a sharded sale has its own.
pub(super) type Stream = (SaleId, u16);

#[derive(Default)]
struct SaleEntries {
    entry_of: HashMap<OrderId, Arc<str>>,
    undecided: HashMap<Arc<str>, usize>,
}

/// Outbox entries with orders still undecided, per outbox stream.
#[derive(Default)]
pub(super) struct OutboxIndex {
    sales: DashMap<Stream, SaleEntries>,
}

impl OutboxIndex {
    /// Remembers that `entry` carries `orders`, unless the entry is known
    /// already (its count then reflects acknowledgements made since).
    pub(super) fn record(&self, sale: &Stream, entry: &str, orders: &[OrderId]) {
        let mut sale = self.sales.entry(sale.clone()).or_default();
        if orders.is_empty() || sale.undecided.contains_key(entry) {
            return;
        }
        let entry: Arc<str> = Arc::from(entry);
        sale.undecided.insert(Arc::clone(&entry), orders.len());
        for order in orders {
            sale.entry_of.insert(*order, Arc::clone(&entry));
        }
    }

    /// Whether `order` is known here as carried by `entry` and still
    /// undecided. False for an order of an entry this process knows that
    /// was acknowledged already (the outbox read leaves it out).
    pub(super) fn is_undecided(&self, sale: &Stream, entry: &str, order: &OrderId) -> bool {
        self.sales.get(sale).is_some_and(|entries| {
            entries
                .entry_of
                .get(order)
                .is_some_and(|known| &**known == entry)
        })
    }

    /// Marks `orders` decided and returns the entries that no longer carry
    /// an undecided order (to be deleted from the stream). Unknown orders
    /// (acknowledged already, or never seen here) are ignored.
    pub(super) fn settle(&self, sale: &Stream, orders: &[OrderId]) -> Vec<String> {
        let Some(mut sale_entries) = self.sales.get_mut(sale) else {
            return Vec::new();
        };
        let mut finished = Vec::new();
        for order in orders {
            let Some(entry) = sale_entries.entry_of.remove(order) else {
                continue;
            };
            let left = sale_entries
                .undecided
                .get_mut(&entry)
                .map(|count| {
                    *count -= 1;
                    *count
                })
                .unwrap_or(0);
            if left == 0 {
                sale_entries.undecided.remove(&entry);
                finished.push(entry.to_string());
            }
        }
        let empty = sale_entries.undecided.is_empty();
        drop(sale_entries);
        if empty {
            self.sales
                .remove_if(sale, |_, entries| entries.undecided.is_empty());
        }
        finished
    }

    /// Whether `entry` of `sale` is known here (with undecided orders).
    pub(super) fn knows(&self, sale: &Stream, entry: &str) -> bool {
        self.sales
            .get(sale)
            .is_some_and(|entries| entries.undecided.contains_key(entry))
    }

    /// Forgets the entries of `sale` that are not in `present` (they left
    /// the stream), keeping what is known of the others.
    pub(super) fn keep_only(&self, sale: &Stream, present: &HashSet<&str>) {
        if let Some(mut entries) = self.sales.get_mut(sale) {
            entries
                .undecided
                .retain(|entry, _| present.contains(&**entry));
            entries
                .entry_of
                .retain(|_, entry| present.contains(&**entry));
        }
        self.sales
            .remove_if(sale, |_, entries| entries.undecided.is_empty());
    }

    /// How many entries with undecided orders are known, over all sales.
    pub(super) fn len(&self) -> usize {
        self.sales.iter().map(|s| s.undecided.len()).sum()
    }

    /// Forgets a sale's entries (its outbox was replaced by a rebuild).
    pub(super) fn forget(&self, sale: &Stream) {
        self.sales.remove(sale);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_finishes_when_its_last_order_is_settled_once() {
        let index = OutboxIndex::default();
        let sale = (SaleId::new("s").unwrap(), 0);
        let [a, b, c] = [(); 3].map(|()| OrderId::generate());
        index.record(&sale, "1-0", &[a, b]);
        index.record(&sale, "2-0", &[c]);
        assert!(
            index.settle(&sale, &[a, a]).is_empty(),
            "a twice counts once"
        );
        assert!(!index.is_undecided(&sale, "1-0", &a));
        assert!(index.is_undecided(&sale, "1-0", &b));
        // Recording a known entry again (an outbox read) keeps its count.
        index.record(&sale, "1-0", &[a, b]);
        assert_eq!(index.settle(&sale, &[b, c]), vec!["1-0", "2-0"]);
        assert!(index.settle(&sale, &[a, b, c]).is_empty());
        assert!(index.sales.is_empty());
    }

    #[test]
    fn keeping_only_the_present_entries_forgets_the_rest() {
        let index = OutboxIndex::default();
        let sale = (SaleId::new("s").unwrap(), 0);
        let [a, b, c] = [(); 3].map(|()| OrderId::generate());
        index.record(&sale, "1-0", &[a, b]);
        index.record(&sale, "2-0", &[c]);
        assert!(index.settle(&sale, &[a]).is_empty());
        index.keep_only(&sale, &HashSet::from(["1-0"]));
        assert_eq!(index.len(), 1);
        assert!(!index.is_undecided(&sale, "1-0", &a), "its count is kept");
        assert!(!index.knows(&sale, "2-0"));
        index.keep_only(&sale, &HashSet::new());
        assert_eq!(index.len(), 0);
        assert!(index.sales.is_empty());
    }

    #[test]
    fn forgetting_a_sale_drops_its_entries() {
        let index = OutboxIndex::default();
        let sale = (SaleId::new("s").unwrap(), 0);
        let a = OrderId::generate();
        index.record(&sale, "1-0", &[a]);
        index.forget(&sale);
        assert!(index.settle(&sale, &[a]).is_empty());
    }
}
