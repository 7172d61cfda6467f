//! Rejections that cost nothing: what this instance knows about a sale that
//! lets it turn a buyer away without asking the engine or the store.
//!
//! - **Not started / ended**: a sale's spec never changes once created, and
//!   the engine judges the window with this instance's own clock, so the
//!   spec (learned with the sale's route) answers exactly as the engine
//!   would: for the buyer's tier, whose window may open earlier. This
//!   knowledge never goes stale.
//! - **Sold out**: learned from the decider's answer (`sold_out`, or a
//!   purchase that left nothing). Stock can come back (a cancel, a rebuild,
//!   a move to the fallback), so the knowledge lasts only
//!   [`SaleBook::ttl`] counted from the moment the decider was *asked*
//!   (not answered): whatever the decider saw happened after that moment,
//!   so a sale whose stock came back at time *t* is sold again by every
//!   instance from *t* + ttl at the latest. This instance forgets it at
//!   once when it gives stock back itself ([`SaleBook::stock_returned`]);
//!   a per-sale generation keeps a purchase that was in flight across such
//!   a return from writing the old answer back.
//! - **Unknown sale**: learned from the store having no such sale; kept the
//!   same ttl (a sale created through another instance becomes buyable
//!   here within it), at most [`UNKNOWN_SALES_CAPACITY`] ids, so a flood of
//!   random ids costs one store read per id and bounded memory.
//!
//! It only ever answers rejections, never a sale, and a purchase that
//! carries an `Idempotency-Key` skips the sold-out and window answers: the
//! engine checks the key before anything else (a replay of a made order is
//! answered with that order even when the sale is sold out or over), and
//! only the engine knows every key it accepted, including orders still
//! being committed. A cached `sold_out` can also be given to a buyer at the
//! per-user limit, to whom the engine would have said `limit_exceeded`:
//! both say that nothing was sold, and the limit is per buyer, not cached.

use std::sync::atomic::Ordering;
use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use chrono::{DateTime, Utc};
use stockade_core::rule;
use stockade_core::sale::Window;
use stockade_core::{Item, Purchase, PurchaseOutcome, SaleId, SaleSpec, TierName};

use super::SaleBook;

/// The default lifetime of sold-out and unknown-sale knowledge.
pub const DEFAULT_TTL: Duration = Duration::from_millis(500);

/// The longest lifetime allowed: the documented bound on how long another
/// instance may keep refusing a sale whose stock came back.
pub const MAX_TTL: Duration = Duration::from_secs(1);

/// How many unknown sale ids an instance remembers at most.
pub const UNKNOWN_SALES_CAPACITY: usize = 10_000;

/// Taken just before the decider or the store is asked: what the answer
/// may be recorded against.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    generation: u64,
    asked_at: Instant,
}

impl SaleBook {
    /// How long sold-out and unknown-sale knowledge lasts.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The rejection this instance can give without asking anyone, if any:
    /// `UnknownSale`, `NotStarted`, `Ended` or `SoldOut`, in the order the
    /// engine checks them. The window is the one of the buyer's `tier` (a
    /// tier may start earlier), as the engine judges it. `keyed`: the
    /// purchase carries an idempotency key, so only an unknown sale is
    /// answered here.
    pub fn answer(
        &self,
        sale: &SaleId,
        tier: Option<&TierName>,
        keyed: bool,
        now: DateTime<Utc>,
    ) -> Option<PurchaseOutcome> {
        let known = self.sales.get(sale).filter(|entry| entry.spec.is_some());
        let Some(known) = known else {
            return self
                .is_unknown(sale)
                .then_some(PurchaseOutcome::UnknownSale);
        };
        if keyed {
            return None;
        }
        match known
            .spec
            .as_ref()
            .map(|spec| spec.window_for(rule::tier(spec, tier), now))
        {
            Some(Window::NotStarted) => return Some(PurchaseOutcome::NotStarted),
            Some(Window::Ended) => return Some(PurchaseOutcome::Ended),
            _ => {}
        }
        known
            .sold_out_until
            .is_some_and(|until| Instant::now() < until)
            .then_some(PurchaseOutcome::SoldOut)
    }

    /// Whether the store had no such sale a moment ago (within the ttl).
    pub fn is_unknown(&self, sale: &SaleId) -> bool {
        self.unknown
            .get(sale)
            .is_some_and(|until| Instant::now() < until)
    }

    /// Whether the sale's spec is known here.
    pub fn knows(&self, sale: &SaleId) -> bool {
        self.read(sale, |entry| entry.spec.is_some())
            .unwrap_or(false)
    }

    /// The payment hold of a sale whose spec this instance knows (None:
    /// no hold, or an unknown spec).
    pub fn hold(&self, sale: &SaleId) -> Option<Duration> {
        self.read(sale, |entry| entry.spec.as_ref().and_then(SaleSpec::hold))
            .flatten()
    }

    /// What an order the decider accepted for `purchase` holds, by the
    /// sale's spec; None while the spec is not known here, or if the items
    /// fit no SKU of it (the decider would have refused them).
    pub fn order_terms(&self, purchase: &Purchase) -> Option<OrderTerms> {
        self.read(purchase.sale_id(), |entry| {
            OrderTerms::of(entry.spec.as_ref()?, purchase)
        })
        .flatten()
    }

    /// Remembers a sale's spec, read from the store (it never changes).
    pub fn learn_spec(&self, spec: &SaleSpec) {
        if !self.knows(spec.id()) {
            self.edit(spec.id(), |entry| {
                entry.spec.get_or_insert_with(|| spec.clone());
            });
        }
        self.unknown.remove(spec.id());
    }

    /// To take before asking the decider about a purchase of `sale`.
    pub fn ticket(&self, sale: &SaleId) -> Ticket {
        Ticket {
            generation: self.read(sale, |entry| entry.generation).unwrap_or(0),
            asked_at: Instant::now(),
        }
    }

    /// Learns from the decider's answer to a purchase asked under `ticket`.
    pub fn learn_outcome(&self, sale: &SaleId, ticket: Ticket, outcome: &PurchaseOutcome) {
        let sold_out = match outcome {
            // Sold out is the whole sale; a short SKU says nothing of the
            // others.
            PurchaseOutcome::SoldOut | PurchaseOutcome::Purchased { remaining: 0, .. } => true,
            PurchaseOutcome::Purchased { .. } | PurchaseOutcome::InsufficientStock { .. } => false,
            // Nothing about the stock.
            _ => return,
        };
        // Most answers change nothing: look under the shard's shared lock
        // first, so purchases of one sale do not queue for its write lock.
        let changes = self
            .read(sale, |known| {
                if sold_out {
                    !self.ttl.is_zero() && known.generation == ticket.generation
                } else {
                    known.sold_out_until.is_some()
                }
            })
            .unwrap_or(false);
        if !changes {
            return;
        }
        let Some(mut known) = self.sales.get_mut(sale) else {
            return;
        };
        if !sold_out {
            known.sold_out_until = None;
        } else if known.generation == ticket.generation {
            let until = ticket.asked_at + self.ttl;
            if known
                .sold_out_until
                .is_none_or(|known_until| known_until < until)
            {
                known.sold_out_until = Some(until);
            }
        }
    }

    /// This instance gave stock back to the sale (a cancel, a rebuild, a
    /// move to the fallback): forget that it was sold out, and make answers
    /// to purchases asked before now unable to say so again. Returns
    /// whether the sale has a waiting room (to tick it at once).
    pub fn stock_returned(&self, sale: &SaleId) -> bool {
        let Some(mut known) = self.sales.get_mut(sale) else {
            return false;
        };
        known.generation += 1;
        known.sold_out_until = None;
        matches!(known.room, Some(super::Door::Room(_)))
    }

    /// To take before reading a sale from the store.
    pub fn unknown_ticket(&self) -> Ticket {
        Ticket {
            generation: self.created.load(Ordering::Acquire),
            asked_at: Instant::now(),
        }
    }

    /// The store, read under `ticket`, has no such sale.
    pub fn learn_unknown(&self, sale: &SaleId, ticket: Ticket) {
        if self.ttl.is_zero()
            || self.knows(sale)
            || self.created.load(Ordering::Acquire) != ticket.generation
        {
            return;
        }
        self.unknown
            .insert(sale.clone(), ticket.asked_at + self.ttl);
    }

    /// This instance created (or re-created) the sale: it is unknown no
    /// more, and store reads that raced the creation cannot say otherwise.
    pub fn sale_created(&self, sale: &SaleId) {
        self.created.fetch_add(1, Ordering::AcqRel);
        self.unknown.remove(sale);
    }

    /// How many unknown sale ids are remembered (bounded).
    pub fn unknown_count(&self) -> usize {
        self.unknown.len()
    }
}

/// What an accepted purchase's order holds, by the sale's spec: its items,
/// the buyer's tier (when one of the sale's) and the sale's payment hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderTerms {
    /// The items, each of a SKU of the sale.
    pub items: Vec<Item>,
    /// The buyer's tier.
    pub tier: Option<TierName>,
    /// The sale's payment hold.
    pub hold: Option<Duration>,
}

impl OrderTerms {
    /// The terms of `purchase` under `spec`; None if its items fit no SKU.
    pub fn of(spec: &SaleSpec, purchase: &Purchase) -> Option<Self> {
        let items = rule::resolve(spec, purchase.items()).ok()?;
        let tier = rule::tier(spec, purchase.tier());
        Some(Self {
            items: rule::order_items(spec, &items),
            tier: rule::order_tier(spec, tier),
            hold: spec.hold(),
        })
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use stockade_core::OrderId;

    use super::*;

    fn sale(id: &str) -> SaleId {
        SaleId::new(id).unwrap()
    }

    fn spec(id: &str) -> SaleSpec {
        SaleSpec::builder(id, 10).unwrap().build().unwrap()
    }

    fn purchased(remaining: u32) -> PurchaseOutcome {
        PurchaseOutcome::Purchased {
            order_id: OrderId::generate(),
            remaining,
        }
    }

    #[test]
    fn sold_out_is_known_for_the_ttl_from_the_question() {
        let rejections = SaleBook::new(Duration::from_millis(50));
        let id = sale("s");
        let now = Utc::now();
        rejections.learn_spec(&spec("s"));
        let ticket = rejections.ticket(&id);
        rejections.learn_outcome(&id, ticket, &purchased(0));
        assert_eq!(
            rejections.answer(&id, None, false, now),
            Some(PurchaseOutcome::SoldOut)
        );
        // A keyed purchase asks the engine: it may be a replay.
        assert_eq!(rejections.answer(&id, None, true, now), None);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(rejections.answer(&id, None, false, now), None);
    }

    #[test]
    fn stock_given_back_here_is_seen_at_once_even_by_an_answer_in_flight() {
        let rejections = SaleBook::new(Duration::from_secs(1));
        let id = sale("s");
        let now = Utc::now();
        rejections.learn_spec(&spec("s"));
        let in_flight = rejections.ticket(&id);
        rejections.stock_returned(&id);
        rejections.learn_outcome(&id, in_flight, &PurchaseOutcome::SoldOut);
        assert_eq!(rejections.answer(&id, None, false, now), None);
        let ticket = rejections.ticket(&id);
        rejections.learn_outcome(&id, ticket, &PurchaseOutcome::SoldOut);
        assert_eq!(
            rejections.answer(&id, None, false, now),
            Some(PurchaseOutcome::SoldOut)
        );
        rejections.stock_returned(&id);
        assert_eq!(rejections.answer(&id, None, false, now), None);
        // Stock seen by a later purchase clears it too.
        rejections.learn_outcome(&id, rejections.ticket(&id), &PurchaseOutcome::SoldOut);
        rejections.learn_outcome(&id, rejections.ticket(&id), &purchased(3));
        assert_eq!(rejections.answer(&id, None, false, now), None);
    }

    #[test]
    fn the_window_comes_from_the_spec() {
        let rejections = SaleBook::new(Duration::ZERO);
        let now = Utc::now();
        let windowed = SaleSpec::builder("w", 10)
            .unwrap()
            .starts_at(now + TimeDelta::seconds(10))
            .ends_at(now + TimeDelta::seconds(20))
            .build()
            .unwrap();
        let id = sale("w");
        assert_eq!(rejections.answer(&id, None, false, now), None);
        rejections.learn_spec(&windowed);
        assert_eq!(
            rejections.answer(&id, None, false, now),
            Some(PurchaseOutcome::NotStarted)
        );
        assert_eq!(
            rejections.answer(&id, None, false, now + TimeDelta::seconds(10)),
            None
        );
        assert_eq!(
            rejections.answer(&id, None, false, now + TimeDelta::seconds(20)),
            Some(PurchaseOutcome::Ended)
        );
        // A zero ttl keeps no sold-out knowledge.
        rejections.learn_outcome(&id, rejections.ticket(&id), &PurchaseOutcome::SoldOut);
        assert_eq!(
            rejections.answer(&id, None, false, now + TimeDelta::seconds(15)),
            None
        );
    }

    #[test]
    fn unknown_sales_expire_are_bounded_and_yield_to_a_creation() {
        let rejections = SaleBook::new(Duration::from_millis(50));
        let now = Utc::now();
        let id = sale("ghost");
        rejections.learn_unknown(&id, rejections.unknown_ticket());
        assert_eq!(
            rejections.answer(&id, None, true, now),
            Some(PurchaseOutcome::UnknownSale)
        );
        // A read that raced a creation here records nothing.
        let raced = rejections.unknown_ticket();
        rejections.sale_created(&id);
        assert_eq!(rejections.answer(&id, None, false, now), None);
        rejections.learn_unknown(&id, raced);
        assert_eq!(rejections.answer(&id, None, false, now), None);
        rejections.learn_unknown(&id, rejections.unknown_ticket());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(rejections.answer(&id, None, false, now), None);
        for i in 0..(UNKNOWN_SALES_CAPACITY * 3) {
            rejections.learn_unknown(&sale(&format!("flood-{i}")), rejections.unknown_ticket());
        }
        assert!(rejections.unknown_count() <= UNKNOWN_SALES_CAPACITY + UNKNOWN_SALES_CAPACITY / 10);
    }
}
