//! What the handlers and the ticker share: the queue backend and the token
//! signer. The rooms this instance has read from the store are kept in the
//! service's [`SaleBook`] with the rest of what it knows of each sale.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;
use stockade_core::{SaleId, SaleSpec, UserId};
use tokio::sync::Notify;

use super::token::AdmissionSigner;
use super::{PREQUEUE_PLACES, QueueBackend, RoomConfig, TicketId};
use stockade_store::{OrderStore, StoreError};

use crate::sale_book::{Door, SaleBook};

/// A sale with a waiting room.
#[derive(Debug, Clone)]
pub struct RoomInfo {
    /// The sale (its window).
    pub spec: SaleSpec,
    /// Its room.
    pub config: RoomConfig,
}

/// What the store says about a sale's waiting room.
#[derive(Debug, Clone)]
pub enum RoomLookup {
    /// There is no such sale.
    UnknownSale,
    /// The sale has no waiting room: buyers buy directly.
    NoRoom,
    /// The sale has this waiting room.
    Room(Arc<RoomInfo>),
    /// The sale is allocated by a draw: buyers enter it, nobody buys.
    Draw,
}

/// The waiting rooms of the service. See the [module](super) docs.
pub struct WaitingRooms {
    backend: Arc<dyn QueueBackend>,
    signer: AdmissionSigner,
    wake: Notify,
    /// Tickets waiting in each room at this instance's last tick of it.
    waiting: DashMap<SaleId, u64>,
}

impl std::fmt::Debug for WaitingRooms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingRooms")
            .field("backend", &self.backend.name())
            .finish()
    }
}

impl WaitingRooms {
    /// Rooms on `backend`, with tokens signed by `secret`.
    pub fn new(backend: Arc<dyn QueueBackend>, secret: &[u8]) -> Self {
        Self {
            backend,
            signer: AdmissionSigner::new(secret),
            wake: Notify::new(),
            waiting: DashMap::new(),
        }
    }

    /// Records how many tickets wait in `sale`'s room (the ticker does,
    /// each tick).
    pub fn record_waiting(&self, sale: &SaleId, waiting: u64) {
        self.waiting.insert(sale.clone(), waiting);
    }

    /// How many tickets waited in `sale`'s room at the last tick this
    /// instance ran; None for a sale without a room (or not ticked here yet).
    pub fn waiting(&self, sale: &SaleId) -> Option<u64> {
        self.waiting.get(sale).map(|w| *w)
    }

    /// The queue backend.
    pub fn backend(&self) -> &Arc<dyn QueueBackend> {
        &self.backend
    }

    /// A fresh ticket of `user` in `sale`'s queue: before the start at a
    /// random place among the early joiners, after it at the next place
    /// ([`next_place`]).
    pub fn fresh_ticket(
        &self,
        sale: &SaleId,
        user: &UserId,
        now_ms: i64,
        prequeue: bool,
    ) -> TicketId {
        let place = if prequeue {
            stockade_core::entropy::random_below(PREQUEUE_PLACES)
        } else {
            next_place(now_ms)
        };
        self.signer.mint_ticket(sale, place, user)
    }

    /// The admission token signer.
    pub fn signer(&self) -> &AdmissionSigner {
        &self.signer
    }

    /// The sale's waiting room, read from the store the first time (once
    /// for purchases that miss together); a sale the store does not have
    /// is remembered as unknown in `book`.
    pub async fn lookup(
        &self,
        book: &SaleBook,
        store: &OrderStore,
        sale: &SaleId,
    ) -> Result<RoomLookup, StoreError> {
        let known = |book: &SaleBook| {
            book.room(sale).map(|known| match known {
                Door::Room(room) => RoomLookup::Room(room),
                Door::Open => RoomLookup::NoRoom,
                Door::Draw => RoomLookup::Draw,
            })
        };
        if let Some(found) = known(book) {
            return Ok(found);
        }
        // One read for a burst of lookups that missed together: the others
        // find its answer in the book when their turn comes.
        let _turn = book.cold_read_turn(sale).await;
        if let Some(found) = known(book) {
            return Ok(found);
        }
        if book.is_unknown(sale) {
            return Ok(RoomLookup::UnknownSale);
        }
        let read = book.unknown_ticket();
        let Some((spec, config, draw)) = store.sale_with_room(sale).await? else {
            book.learn_unknown(sale, read);
            return Ok(RoomLookup::UnknownSale);
        };
        if draw {
            book.learn_room(spec.id(), Door::Draw);
            return Ok(RoomLookup::Draw);
        }
        Ok(self.learn(book, spec, config).await)
    }

    /// Remembers a sale's room (at creation, or read from the store) in
    /// `book` and lists it for the tickers.
    pub async fn learn(
        &self,
        book: &SaleBook,
        spec: SaleSpec,
        config: Option<RoomConfig>,
    ) -> RoomLookup {
        let Some(config) = config else {
            book.learn_room(spec.id(), Door::Open);
            return RoomLookup::NoRoom;
        };
        if let Err(error) = self.backend.register(spec.id()).await {
            // Listed by the next lookup on any instance that has it.
            tracing::warn!(%error, sale = %spec.id(), "cannot list the waiting room for the tickers yet");
            let room = Arc::new(RoomInfo { spec, config });
            return RoomLookup::Room(room);
        }
        let room = Arc::new(RoomInfo { spec, config });
        book.learn_room(room.spec.id(), Door::Room(Arc::clone(&room)));
        self.wake.notify_one();
        RoomLookup::Room(room)
    }

    /// Forgets the waiting count of `sale` (the sale was let go after its
    /// retention; the store still has its settings).
    pub fn forget_local(&self, sale: &SaleId) {
        self.waiting.remove(sale);
    }

    /// Stock came back to a sale with a room on this instance: tick at
    /// once, so the queue reopens and admits without waiting for the next
    /// tick.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Completes when something asks for a tick before the next one.
    pub async fn woken(&self) {
        self.wake.notified().await;
    }
}

/// Milliseconds from the Unix epoch to 2025-01-01, where places start.
const PLACES_FROM_MS: i64 = 1_735_689_600_000;

/// Places per millisecond: joins in one millisecond on one instance keep
/// their order up to this many.
const PLACES_PER_MS: u64 = 1_024;

/// The last place this process handed out.
static LAST_PLACE: AtomicU64 = AtomicU64::new(0);

/// The place of a ticket joining at `now_ms` after the start: by the
/// joining instant to the millisecond (so instances sharing a queue order
/// their joins by time, up to their clocks' skew), and after every place
/// this process handed out before (so one instance's joins keep their
/// order exactly). Above every pre-queue place; exact in the f64 score of
/// a Redis sorted set for the next 270 years.
pub fn next_place(now_ms: i64) -> u64 {
    let by_time = PREQUEUE_PLACES
        + u64::try_from(now_ms.saturating_sub(PLACES_FROM_MS)).unwrap_or(0) * PLACES_PER_MS;
    let mut last = LAST_PLACE.load(Ordering::Relaxed);
    loop {
        let place = by_time.max(last + 1);
        match LAST_PLACE.compare_exchange_weak(last, place, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return place,
            Err(seen) => last = seen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_follow_time_and_never_repeat() {
        let t = PLACES_FROM_MS + 86_400_000;
        let a = next_place(t);
        let b = next_place(t);
        let c = next_place(t - 5_000);
        let d = next_place(t + 1_000);
        assert!(
            a >= PREQUEUE_PLACES && a < b && b < c && c < d,
            "{a} {b} {c} {d}"
        );
        // A clock from before 2025 still queues behind the pre-queue.
        assert!(next_place(0) > PREQUEUE_PLACES);
        // Exact as an f64 score for centuries.
        let far = next_place(PLACES_FROM_MS + 270 * 365 * 86_400_000);
        assert!(far < 1 << 53, "{far}");
    }
}
