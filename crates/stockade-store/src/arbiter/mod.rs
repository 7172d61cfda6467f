//! The store as the arbiter of every order.
//!
//! A commit locks the rows of the sales it touches (in id order, so two
//! instances' batches never deadlock) and judges each order in arrival
//! order against the sale's epoch, its sold count, the buyer's holding and
//! the buyer's idempotency keys, as the store holds them. Each order gets
//! its own [`Verdict`]: the good ones commit, a bad one is recorded as void
//! and never blocks the others. A void order keeps the buyer's idempotency
//! key (unless the key belonged to another order already), so the key
//! names that one failed order for good: a replay is told it failed, and
//! can never make a second order. Whatever an engine decided, the store never
//! holds more than the stock, a buyer over the limit, or two orders for one
//! key.
//!
//! The same checks decide purchases when the store is the engine
//! ([`OrderStore::purchase`]: `--engine postgres`, or a sale moved to the
//! fallback): one transaction that locks the sale row, checks and inserts
//! the order, after an unlocked first look that turns refused buyers away
//! without a lock or a write.
//!
//! - `purchase`: deciding a purchase in the store itself;
//! - `rows`: the sale, holding and sold-count rows the arbiter reads and
//!   writes, and the sales' row locks.

mod purchase;
mod rows;

use std::collections::{HashMap, HashSet};

use stockade_core::rule;
use stockade_core::{
    Epoch, IdempotencyKey, Order, OrderId, PurchaseOutcome, SaleId, SaleSpec, SoldCounts, UserId,
};

use tokio::sync::oneshot;

use super::authority::Authority;
use super::bulk::{self, NewRow};
use super::{OrderStore, StoreError, VOID};

pub use rows::Held;
pub(crate) use rows::{
    IN_CHUNK, STATE_COLUMNS, placeholders, read_holdings, read_sales, sale_state_from_row,
    write_holdings, write_sold,
};

/// The store's verdict on one order handed to [`OrderStore::commit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The order is committed (now, or by an earlier commit of the same id).
    Committed,
    /// The store refused the order and recorded it as void: it will never
    /// be committed, and nothing was sold.
    Void(VoidReason),
}

/// Why the store refused an order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VoidReason {
    /// It was decided under an epoch that is no longer the sale's: another
    /// authority decides the sale now.
    StaleEpoch {
        /// The sale's epoch.
        current: Epoch,
    },
    /// The store's stock does not cover it: the engine was out of line.
    Oversold,
    /// The buyer would exceed the limit: the engine was out of line.
    OverLimit,
    /// The buyer's idempotency key already names another committed order.
    KeyTaken {
        /// The committed order.
        original: OrderId,
    },
    /// The store has no such sale.
    UnknownSale,
    /// The order names a SKU its sale does not have.
    UnknownSku,
    /// An earlier commit of the same id already recorded it as void.
    Earlier,
}

impl VoidReason {
    /// A short stable name for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Self::StaleEpoch { .. } => "stale_epoch",
            Self::Oversold => "oversold",
            Self::OverLimit => "over_limit",
            Self::KeyTaken { .. } => "key_taken",
            Self::UnknownSale => "unknown_sale",
            Self::UnknownSku => "unknown_sku",
            Self::Earlier => "earlier",
        }
    }
}

/// A sale as the arbiter sees it.
#[derive(Debug, Clone)]
pub struct SaleState {
    /// The spec.
    pub spec: SaleSpec,
    /// The current epoch.
    pub epoch: Epoch,
    /// Who decides its purchases.
    pub authority: Authority,
    /// Items held by live orders.
    pub sold: u32,
    /// Of each SKU (in the spec's order; they add up to `sold`), and of
    /// each SKU by each tier's buyers.
    pub counts: SoldCounts,
    /// The primary epoch a move to the fallback left undrained: its orders
    /// still commit (see `docs/consistency.md`).
    pub undrained: Option<Epoch>,
}

impl SaleState {
    /// Whether an order decided under `epoch` may still commit: it is the
    /// sale's epoch, or the primary epoch a fallback move left undrained.
    pub fn accepts(&self, epoch: Epoch) -> bool {
        epoch == self.epoch || self.undrained == Some(epoch)
    }
}

impl SaleState {
    /// Items left.
    pub fn remaining(&self) -> u32 {
        self.spec.total_stock().saturating_sub(self.sold)
    }

    /// Items left of each SKU, in the spec's order.
    pub fn sku_remaining(&self) -> Vec<u32> {
        self.counts.left(&self.spec)
    }

    /// Counts an order's items (resolved against the spec) as sold to a
    /// buyer of `tier`.
    pub(crate) fn take(&mut self, tier: Option<usize>, items: &[(usize, u32)]) {
        self.counts.take(tier, items);
        self.sold += items.iter().map(|&(_, q)| q).sum::<u32>();
    }

    /// Counts an order's items as no longer sold; None (nothing changed)
    /// if fewer were sold.
    pub(crate) fn give_back(&mut self, tier: Option<usize>, items: &[(usize, u32)]) -> Option<()> {
        let quantity: u32 = items.iter().map(|&(_, q)| q).sum();
        let sold = self.sold.checked_sub(quantity)?;
        self.counts.give_back(tier, items)?;
        self.sold = sold;
        Some(())
    }

    /// The `sku_sold` column: None for a one-SKU sale.
    pub(crate) fn sku_sold_column(&self) -> Option<String> {
        (self.counts.sold.len() > 1).then(|| {
            self.counts
                .sold
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// The `tier_sold` column: None for a sale without tiers.
    pub(crate) fn tier_sold_column(&self) -> Option<String> {
        (!self.counts.tier_sold.is_empty())
            .then(|| serde_json::to_string(&self.counts.tier_sold).unwrap_or_default())
    }
}

/// What a batch changes, per sale (its sold counts are the sale's state
/// as the batch leaves it).
#[derive(Default)]
struct SaleChanges {
    holdings: HashMap<UserId, Held>,
}

impl OrderStore {
    /// Commits a batch of orders accepted by an engine, in one transaction,
    /// and returns one verdict per order (same order as `orders`). An
    /// order already committed is `Committed` again, so a batch can be
    /// retried and an outbox replayed safely. Fails only when the store
    /// itself fails (nothing is then committed).
    pub async fn commit(&self, orders: &[Order]) -> Result<Vec<Verdict>, StoreError> {
        self.calls
            .run(async {
                let (locked, _) = oneshot::channel();
                self.commit_in_turn(orders, locked).await
            })
            .await
    }

    /// [`OrderStore::commit`], telling `locked` as soon as the transaction
    /// holds the row locks of every sale in `orders` (or dropping it if the
    /// commit fails before). From then on, a transaction that asks for one
    /// of those locks waits for this one to end, so it judges its orders of
    /// these sales after this batch's: a writer that starts the next batch
    /// only after `locked` has keeps arrival order per sale with several
    /// commits in flight.
    pub async fn commit_in_turn(
        &self,
        orders: &[Order],
        locked: oneshot::Sender<()>,
    ) -> Result<Vec<Verdict>, StoreError> {
        self.calls
            .run(async {
                if orders.is_empty() {
                    return Ok(Vec::new());
                }
                let mut sale_ids: Vec<&SaleId> = orders.iter().map(|o| &o.sale_id).collect();
                sale_ids.sort();
                sale_ids.dedup();
                let kind = self.kind;
                let mut tx = self.pool.begin().await?;
                bulk::plan_for_the_tables_as_they_are(kind, &mut tx).await?;
                let mut sales = bulk::lock_and_read_sales(kind, &mut tx, &sale_ids).await?;
                // The receiver may be gone (a plain `commit`): nobody waits then.
                let _ = locked.send(());
                let existing = bulk::read_existing(kind, &mut tx, orders).await?;
                let mut holdings = bulk::read_holdings(kind, &mut tx, orders).await?;
                let mut owners = bulk::read_key_owners(kind, &mut tx, orders).await?;

                let mut verdicts = Vec::with_capacity(orders.len());
                let mut rows: Vec<NewRow<'_>> = Vec::new();
                let mut changes: HashMap<SaleId, SaleChanges> = HashMap::new();
                let mut decided: HashSet<OrderId> = HashSet::new();
                for order in orders {
                    if let Some(&void) = existing.get(&order.id) {
                        verdicts.push(if void {
                            Verdict::Void(VoidReason::Earlier)
                        } else {
                            Verdict::Committed
                        });
                        continue;
                    }
                    if !decided.insert(order.id) {
                        // The same id twice in one batch: the first one decided it,
                        // as a later commit of the id would find it decided; one of
                        // an unknown sale left no record, so it is unknown again.
                        let first = rows.iter().find(|row| row.order.id == order.id);
                        verdicts.push(match first {
                            Some(row) if row.status != VOID => Verdict::Committed,
                            Some(_) => Verdict::Void(VoidReason::Earlier),
                            None => Verdict::Void(VoidReason::UnknownSale),
                        });
                        continue;
                    }
                    let Some(state) = sales.get_mut(&order.sale_id) else {
                        // No row to attach a void record to: the sale is unknown.
                        verdicts.push(Verdict::Void(VoidReason::UnknownSale));
                        continue;
                    };
                    let held = holdings.entry(order.sale_id.clone()).or_default();
                    let owned = owners.entry(order.sale_id.clone()).or_default();
                    // Whether the buyer's key is still free (a void order keeps it
                    // then; otherwise it names another order already).
                    let key_free = order.idempotency_key.as_ref().is_none_or(|key| {
                        !owned.contains_key(&(order.user_id.clone(), key.clone()))
                    });
                    // Committed under its sale's payment hold: only the spec says
                    // whether the sale holds, and only the store has every spec.
                    let (status, expires_at) =
                        Order::terms_under_hold(order.created_at, state.spec.hold());
                    let verdict = judge(state, held, owned, order);
                    if verdict == Verdict::Committed {
                        let change = changes.entry(order.sale_id.clone()).or_default();
                        change
                            .holdings
                            .insert(order.user_id.clone(), held[&order.user_id].clone());
                        rows.push(NewRow {
                            order,
                            status: status.as_str(),
                            expires_at,
                            keeps_key: true,
                        });
                    } else {
                        // The key stays with the void order, unless it already
                        // names another one.
                        let keeps_key = key_free;
                        if keeps_key && let Some(key) = &order.idempotency_key {
                            owned.insert((order.user_id.clone(), key.clone()), order.id);
                        }
                        rows.push(NewRow {
                            order,
                            status: VOID,
                            expires_at: None,
                            keeps_key,
                        });
                    }
                    verdicts.push(verdict);
                }
                // Write what the verdicts decided: every table once, in bulk.
                bulk::insert_orders(kind, &mut tx, &rows).await?;
                let held: Vec<(&SaleId, &UserId, &Held)> = changes
                    .iter()
                    .flat_map(|(sale, change)| {
                        change
                            .holdings
                            .iter()
                            .map(move |(user, held)| (sale, user, held))
                    })
                    .collect();
                bulk::upsert_holdings(kind, &mut tx, &held).await?;
                let sold: Vec<&SaleState> =
                    changes.keys().filter_map(|sale| sales.get(sale)).collect();
                bulk::write_sold_counts(kind, &mut tx, &sold).await?;
                tx.commit().await?;
                let mut entered: HashMap<(&SaleId, &'static str), usize> = HashMap::new();
                for row in rows.iter().filter(|row| row.status != VOID) {
                    *entered.entry((&row.order.sale_id, row.status)).or_default() += 1;
                }
                for ((sale, status), count) in entered {
                    crate::order_transitions(sale.as_str(), status, count);
                }
                Ok(verdicts)
            })
            .await
    }
}

/// Judges one order of a commit against the sale and the buyer as the
/// batch has left them, and applies it to both if it fits.
fn judge(
    state: &mut SaleState,
    holdings: &mut HashMap<UserId, Held>,
    owners: &mut HashMap<(UserId, IdempotencyKey), OrderId>,
    order: &Order,
) -> Verdict {
    if !state.accepts(order.epoch) {
        return Verdict::Void(VoidReason::StaleEpoch {
            current: state.epoch,
        });
    }
    if let Some(key) = &order.idempotency_key
        && let Some(original) = owners.get(&(order.user_id.clone(), key.clone()))
    {
        return Verdict::Void(VoidReason::KeyTaken {
            original: *original,
        });
    }
    let Some(items) = rule::resolve_order(&state.spec, &order.items) else {
        return Verdict::Void(VoidReason::UnknownSku);
    };
    let tier = rule::tier(&state.spec, order.tier.as_ref());
    let mut held = holdings.get(&order.user_id).cloned().unwrap_or_default();
    // The window was judged when the engine accepted the order; the
    // reserves are judged as they stood then.
    let spec = &state.spec;
    let held_of_sku = |i: usize| held.of(&spec.skus()[i].id);
    let judged = rule::limits_and_stock(
        spec,
        order.created_at,
        tier,
        held.total,
        held_of_sku,
        &state.counts,
        &items,
    );
    match judged {
        Err(PurchaseOutcome::LimitExceeded { .. }) => Verdict::Void(VoidReason::OverLimit),
        Err(_) => Verdict::Void(VoidReason::Oversold),
        Ok(()) => {
            held.add(spec, &items);
            state.take(tier, &items);
            holdings.insert(order.user_id.clone(), held);
            if let Some(key) = &order.idempotency_key {
                owners.insert((order.user_id.clone(), key.clone()), order.id);
            }
            Verdict::Committed
        }
    }
}
