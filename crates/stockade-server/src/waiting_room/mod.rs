//! The waiting room of a sale: buyers queue, and are admitted at a set
//! rate, but never more at once than the stock left can serve.
//!
//! A sale created with `"waiting_room": {...}` takes purchases only with an
//! `Admission-Token` header. Buyers join the queue (`POST
//! /v1/sales/{id}/queue`) and poll their ticket (`GET /v1/queue/{ticket}`);
//! an admitted ticket carries the token: signed by the service
//! ([`token`]), bound to the buyer and the sale, valid for the room's
//! admission ttl.
//!
//! **Outstanding admissions.** An admission is *outstanding* while it is
//! admitted, its token has not expired (plus a grace of
//! [`OUTSTANDING_GRACE`] for purchases that passed the door just before
//! the expiry) and it has not been used to buy. A purchase that passes the
//! door with the token uses it up once the purchase named an order
//! (201, 202, or 503 with an order id): after the engine took the stock, so
//! the two never count the same item twice in the buyer's favour. A refused
//! or failed purchase leaves it outstanding, and the token buys again.
//!
//! **One admission, one purchase.** The token is *spent* atomically with
//! its purchase ([`door`]): the purchase reserves the ticket's spend record
//! before it is decided (one atomic step on the backend, shared by every
//! instance), turns it into a spent record if it named an order, and
//! removes it otherwise. Of concurrent purchases with one token, one holds
//! the reservation and the others are 403 `admission_spent`; a spent token
//! stays spent until it expires (a cancel gives the item back, not the
//! admission). A retry with the `Idempotency-Key` of the purchase that
//! spent it still passes the door, and gets its order. The ticker never lets the outstanding admissions exceed
//! `floor(remaining × factor)`: admission follows the stock. It reads the
//! room's count of used admissions *before* it reads the stock, and counts
//! the admissions used since as still outstanding, so a stock figure that
//! went stale during the tick can only make it admit fewer. When the sale is sold out the queue
//! closes (every waiting ticket becomes `closed`, joins answer 409
//! `sold_out`); when stock comes back (a cancel, an expired hold, a
//! rebuild), it opens again and admits more.
//!
//! **Pre-queue.** Buyers who join before `starts_at` are ordered uniformly
//! at random among themselves; their positions are provisional until the
//! start. Later joins queue behind them in arrival order.
//!
//! **Backends.** One trait, [`QueueBackend`], two implementations run
//! through one test suite: [`memory::MemoryQueues`] (the embedded default,
//! one process) and [`redis::RedisQueues`] (any number of instances: every
//! join, poll and admission is one Lua script on the sale's keys). Join,
//! poll and admission cost O(log n) in the queue length.
//!
//! # Layout
//! - `mod.rs`: the room's settings, tickets and the backend trait.
//! - [`memory`], [`redis`]: the two backends.
//! - [`token`]: signing and checking admission tokens.
//! - [`rooms`]: what the handlers share: the backend, the signer, and the
//!   rooms this instance knows.
//! - [`door`]: the `Admission-Token` check of the purchase path, and the
//!   spending of the token with its purchase ([`spend`]: the records of
//!   the memory backend).
//! - [`ticker`]: the loop that closes, reopens and admits.

pub mod door;
pub mod memory;
pub mod redis;
pub mod rooms;
pub mod spend;
pub mod ticker;
pub mod token;

use std::fmt;
use std::time::Duration;

/// How long after its expiry an unused admission still counts as
/// outstanding: a purchase that passed the door just before the expiry is
/// decided within it.
pub const OUTSTANDING_GRACE: Duration = Duration::from_secs(5);

use async_trait::async_trait;
use stockade_core::{SaleId, UserId, ValidationError};

pub use rooms::{RoomInfo, RoomLookup, WaitingRooms};
pub use stockade_core::RoomConfig;
pub use stockade_core::room::CloseReason;

/// A queue ticket: `<sale id>.<place>.<buyer>.<mac>`, where `place` is
/// the ticket's place in the queue (16 hex digits), `buyer` the buyer's id
/// in base64url and `mac` 128 bits of an HMAC over the three under the
/// service's admission secret ([`token::AdmissionSigner::mint_ticket`]).
///
/// A ticket describes itself so that it survives its queue: when Redis
/// loses a room's keys (a restart without persistence, a failover to a
/// replica that had not caught up), a ticket polled afterwards is put back
/// at its own place ([`QueueBackend::ticket`]), and the queue order is
/// kept. The mac makes tickets unguessable and unforgeable: nobody picks
/// their own place.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TicketId(String);

/// The place of a ticket that joined before the start: drawn at random
/// below this, so early joiners come first, in random order.
pub const PREQUEUE_PLACES: u64 = 1 << 40;

impl TicketId {
    /// The most bytes a ticket can take (a 64-byte sale id, a 128-byte
    /// buyer id).
    pub const MAX_LEN: usize = 64 + 1 + 16 + 1 + 171 + 1 + 32;

    /// Parses a ticket from a path: its form only (whether this service
    /// minted it is [`token::AdmissionSigner::ticket_is_genuine`]).
    pub fn parse(raw: &str) -> Result<Self, ValidationError> {
        let bad = || {
            ValidationError::new(
                "ticket",
                "is not a queue ticket (expected <sale id>.<place>.<buyer>.<mac>, as the join answered)",
            )
        };
        let mut parts = raw.split('.');
        let (Some(sale), Some(place), Some(user), Some(mac), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad());
        };
        SaleId::new(sale).map_err(|_| bad())?;
        let hex = |text: &str, len: usize| {
            text.len() == len
                && text
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let base64url = (2..=171).contains(&user.len())
            && user
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !hex(place, 16) || !hex(mac, 32) || !base64url {
            return Err(bad());
        }
        // Whether the buyer part decodes is for the mac check to say: a
        // well-formed ticket this service did not mint is unknown (404).
        Ok(Self(raw.to_owned()))
    }

    /// Joins the parts of a ticket ([`token::AdmissionSigner`] computes the
    /// mac).
    pub(crate) fn from_parts(sale: &SaleId, place: u64, user: &UserId, mac: &str) -> Self {
        use base64::Engine as _;
        let user = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(user.as_str());
        Self(format!("{sale}.{place:016x}.{user}.{mac}"))
    }

    fn part(&self, index: usize) -> &str {
        self.0
            .split('.')
            .nth(index)
            .expect("a ticket has four parts")
    }

    /// The sale whose queue this ticket is in.
    pub fn sale(&self) -> SaleId {
        SaleId::new(self.part(0)).expect("a ticket names a valid sale")
    }

    /// The ticket's place in its queue: lower is served first.
    pub fn place(&self) -> u64 {
        u64::from_str_radix(self.part(1), 16).expect("a ticket has a hex place")
    }

    /// The buyer the ticket was issued to (None: the buyer part does not
    /// decode, so this service did not mint it).
    pub fn user(&self) -> Option<UserId> {
        decode_user(self.part(2))
    }

    /// The mac part.
    pub(crate) fn mac(&self) -> &str {
        self.part(3)
    }

    /// The ticket as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Wraps text a backend stored (its own tickets).
    pub(crate) fn from_stored(text: String) -> Self {
        Self(text)
    }
}

fn decode_user(text: &str) -> Option<UserId> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .ok()?;
    UserId::stored(String::from_utf8(bytes).ok()?).ok()
}

impl fmt::Display for TicketId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a ticket stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TicketState {
    /// In the queue; 1 is next.
    Waiting {
        /// Place in the queue.
        position: u64,
    },
    /// Admitted until this instant (ms since the epoch).
    Admitted {
        /// When the admission expires.
        until_ms: i64,
    },
    /// Out of the queue for good.
    Closed(CloseReason),
}

/// A ticket as a backend sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketView {
    /// The ticket.
    pub ticket: TicketId,
    /// Its buyer.
    pub user: UserId,
    /// Where it stands.
    pub state: TicketState,
}

/// The answer to a join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinOutcome {
    /// The buyer's ticket: `created` when new, false when the buyer already
    /// held a live (waiting or admitted) ticket.
    Joined {
        /// The ticket.
        view: TicketView,
        /// Whether it is new.
        created: bool,
    },
    /// The queue is closed.
    Closed(CloseReason),
}

/// What the ticker tells a room on each tick.
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    /// Now, ms since the epoch.
    pub now_ms: i64,
    /// Whether the sale has started (admissions begin then).
    pub started: bool,
    /// Whether the sale has ended (the queue closes for good).
    pub ended: bool,
    /// Items left, read after `used_before` (from the engine: 0 while it is
    /// rebuilt; admits nobody then).
    pub remaining: u32,
    /// Whether the store, the source of truth, has nothing left: only then
    /// does the queue close as sold out (a zero `remaining` alone keeps
    /// every ticket in its place).
    pub sold_out: bool,
    /// The room's count of used admissions ([`QueueBackend::used`]), read
    /// before `remaining`: admissions used since count as outstanding.
    pub used_before: u64,
    /// Admissions that expired before this instant (ms) no longer count as
    /// outstanding (`now_ms` minus [`OUTSTANDING_GRACE`] in service).
    pub expired_before_ms: i64,
    /// The room's settings.
    pub config: RoomConfig,
}

/// What a tick did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TickReport {
    /// Tickets admitted by this tick, in queue order.
    pub admitted: Vec<TicketId>,
    /// Outstanding admissions after it.
    pub outstanding: u64,
    /// Tickets still waiting.
    pub waiting: u64,
    /// Why the queue is closed, if it is.
    pub closed: Option<CloseReason>,
}

/// A queue backend failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum QueueError {
    /// Redis cannot be reached or timed out: retry later.
    #[error("waiting room unavailable: {0}")]
    Unavailable(String),
    /// Anything else.
    #[error("waiting room failed: {0}")]
    Failed(String),
}

/// Where queues live. Every method is one atomic step.
#[async_trait]
pub trait QueueBackend: Send + Sync + fmt::Debug {
    /// `memory` or `redis`.
    fn name(&self) -> &'static str;

    /// Queues the buyer of `fresh` (a ticket minted for this join, see
    /// [`WaitingRooms::fresh_ticket`]), or answers the buyer's live
    /// ticket. `prequeue`: the sale has not started (early joiners are
    /// served first, in random order).
    async fn join(
        &self,
        fresh: &TicketId,
        now_ms: i64,
        prequeue: bool,
    ) -> Result<JoinOutcome, QueueError>;

    /// A ticket, or None if no such ticket was issued. With `restore` (the
    /// caller checked that this service minted it), a ticket its queue
    /// lost (Redis lost the room's keys) is put back at its own place,
    /// unless its buyer holds a later ticket there (this one was
    /// superseded) or a live admission; an earlier ticket it holds is
    /// superseded by this one, as the lost join did.
    async fn ticket(
        &self,
        ticket: &TicketId,
        now_ms: i64,
        restore: bool,
    ) -> Result<Option<TicketView>, QueueError>;

    /// Closes or reopens the queue as the stock and the window say, and
    /// admits as many as the rate and the stock allow.
    async fn tick(&self, sale: &SaleId, tick: &Tick) -> Result<TickReport, QueueError>;

    /// A purchase with this ticket's admission was decided: the admission
    /// is no longer outstanding, and the room's count of used admissions
    /// grows by one (the first time only).
    async fn consume(&self, ticket: &TicketId) -> Result<(), QueueError>;

    /// Reserves the ticket's admission for one purchase: records `held`
    /// unless the ticket has a record already, and keeps it until
    /// `until_ms` (ms since the epoch). None: reserved; else the record
    /// found (a purchase in flight with it, or the purchase that spent it).
    async fn reserve_admission(
        &self,
        ticket: &TicketId,
        held: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<Option<String>, QueueError>;

    /// Settles the reservation `held`: the record becomes `spent` (the
    /// purchase named an order), or goes (None: refused or failed, the
    /// admission buys again). A record that is no longer `held` is left
    /// alone.
    async fn settle_admission(
        &self,
        ticket: &TicketId,
        held: &str,
        spent: Option<&str>,
    ) -> Result<(), QueueError>;

    /// How many admissions of the room were used so far.
    async fn used(&self, sale: &SaleId) -> Result<u64, QueueError>;

    /// Lists `sale` among the rooms every instance's ticker serves.
    async fn register(&self, sale: &SaleId) -> Result<(), QueueError>;

    /// The rooms to tick.
    async fn rooms(&self) -> Result<Vec<SaleId>, QueueError>;

    /// Stops ticking `sale` (its queue closed for good).
    async fn retire(&self, sale: &SaleId) -> Result<(), QueueError>;

    /// Lets the queue of an ended sale go `after` from now (zero: at once):
    /// its tickets then read as unknown. In Redis every key of the queue
    /// gets that time to live; in memory the room is dropped when called
    /// with zero.
    async fn forget(&self, sale: &SaleId, after: std::time::Duration) -> Result<(), QueueError>;
}
