//! Shared helpers: ids, tickets minted as the service mints them, rooms,
//! ticks, joins.

use std::time::Duration;

use stockade_core::{SaleId, UserId};
use stockade_server::waiting_room::rooms::next_place;
use stockade_server::waiting_room::token::AdmissionSigner;
use stockade_server::waiting_room::{
    JoinOutcome, PREQUEUE_PLACES, QueueBackend, RoomConfig, Tick, TicketId, TicketState, TicketView,
};

pub(crate) const T0: i64 = 1_800_000_000_000;

pub(crate) fn sale(id: &str) -> SaleId {
    SaleId::new(id).unwrap()
}

pub(crate) fn user(i: usize) -> UserId {
    UserId::new(format!("buyer|{i}")).unwrap()
}

/// The tickets' signer (the service's admission secret).
fn signer() -> AdmissionSigner {
    AdmissionSigner::new(b"the suite's admission secret....")
}

/// A ticket minted for a join of buyer `who` at `now_ms`, as the service
/// mints them (`WaitingRooms::fresh_ticket`).
pub(crate) fn fresh(sale: &SaleId, who: usize, now_ms: i64, prequeue: bool) -> TicketId {
    let place = if prequeue {
        rand::random_range(0..PREQUEUE_PLACES)
    } else {
        next_place(now_ms)
    };
    signer().mint_ticket(sale, place, &user(who))
}

pub(crate) fn room(rate: u32, ttl_seconds: u64) -> RoomConfig {
    RoomConfig::new(rate, Duration::from_secs(ttl_seconds), 1_500).unwrap()
}

/// A tick with a fresh stock figure (no admission used since it was read)
/// and no expiry grace.
pub(crate) fn tick(now_ms: i64, remaining: u32, config: RoomConfig) -> Tick {
    Tick {
        now_ms,
        started: true,
        ended: false,
        remaining,
        sold_out: remaining == 0,
        used_before: u64::MAX,
        expired_before_ms: now_ms,
        config,
    }
}

pub(crate) async fn join(
    backend: &dyn QueueBackend,
    sale: &SaleId,
    who: usize,
    now_ms: i64,
) -> (TicketView, bool) {
    match backend
        .join(&fresh(sale, who, now_ms, false), now_ms, false)
        .await
        .unwrap()
    {
        JoinOutcome::Joined { view, created } => (view, created),
        JoinOutcome::Closed(reason) => panic!("the queue is closed: {reason:?}"),
    }
}

pub(crate) async fn state(
    backend: &dyn QueueBackend,
    ticket: &TicketId,
    now_ms: i64,
) -> TicketState {
    backend
        .ticket(ticket, now_ms, false)
        .await
        .unwrap()
        .unwrap()
        .state
}
