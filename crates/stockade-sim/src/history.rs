//! What happened in a run, in order: the event log (every request and
//! answer, every fault, with its simulated instant), hashed to check that a
//! replay does the same, and the facts the oracle judges.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::scenario::Fault;

/// An order some answer named to its buyer, and what the answer promised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The buyer.
    pub user: String,
    /// The idempotency key it was asked with (empty for none).
    pub key: String,
    /// The order.
    pub order: String,
    /// The answer's status code.
    pub status: u16,
    /// The order's status in the answer (`confirmed`, `held`, `pending`).
    pub order_status: String,
    /// When it was named, in simulated ms since the start.
    pub at_ms: u64,
}

/// A purchase's answer, with the answering instance's clock around it
/// (ms since the Unix epoch): the window checks judge it by that clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The buyer.
    pub user: String,
    /// The idempotency key sent ("" when none was).
    pub key: String,
    /// The answer's status code.
    pub status: u16,
    /// The error's code, if it is one.
    pub code: String,
    /// The instance's clock when the request was sent.
    pub sent_ms: i64,
    /// The instance's clock when the answer came.
    pub answered_ms: i64,
    /// The instance that answered.
    pub instance: usize,
    /// When it was sent and answered, in simulated ms since the start.
    pub at_ms: (u64, u64),
    /// Whether the purchase sent a key it had sent before: its 200 or 202
    /// may replay an order made then.
    pub repeat: bool,
    /// What an `insufficient_stock` said was left of its SKU.
    pub remaining: Option<u32>,
}

/// An order the store's arbiter refused after an engine had accepted it,
/// as the service logged it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voided {
    /// The order.
    pub order: String,
    /// Its buyer.
    pub user: String,
    /// The epoch the engine accepted it under.
    pub epoch: u64,
    /// Why the store refused it (`stockade_store::arbiter::VoidReason`'s
    /// label: `oversold`, `over_limit`, `stale_epoch`, ...).
    pub reason: String,
    /// When, in simulated ms since the start.
    pub at_ms: u64,
}

/// A fault as it was played, in simulated ms since the start: from when
/// it struck to when it healed (the same instant for one that heals at
/// once, a loss or a clock jump).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultSpan {
    /// When it struck.
    pub from_ms: u64,
    /// When it healed.
    pub to_ms: u64,
    /// The fault.
    pub fault: Fault,
}

/// A change of the sale's authority the service logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Move {
    /// The sale moved to the fallback.
    ToFallback,
    /// A rebuild put the sale under the engine (back from the fallback,
    /// among other reasons).
    Rebuilt,
}

/// The run's log, shared by every task of the run.
#[derive(Debug, Clone, Default)]
pub struct History {
    inner: Arc<Mutex<Inner>>,
    /// The latest simulated ms a line was logged at, read without the
    /// lock (by [`crate::watchdog`], which must see a blocked run too).
    latest_ms: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct Inner {
    lines: Vec<String>,
    /// The lines of the current instant, not hashed yet.
    instant: (u64, Vec<String>),
    hash: Sha256,
    named: Vec<Named>,
    judged: Vec<Judged>,
    /// Orders a confirm answered 200 `confirmed` for.
    confirmed: Vec<String>,
    /// Orders a cancel answered 200 for.
    cancelled: Vec<String>,
    /// Answers no client may ever get (a 500, a status the API does not
    /// name): each a line saying what and where.
    unexpected: Vec<String>,
    /// Spans that do not say what happened (`crate::events`): each with
    /// the instant it closed and a line saying which and how.
    broken_spans: Vec<(u64, String)>,
    /// Orders a purchase was answered `order_failed` for.
    failed: Vec<String>,
    /// Draw entries an answer named to their buyer.
    entered: Vec<String>,
    /// The epoch the sale is under, as the service last logged it (0
    /// before its first).
    epoch: u64,
    /// Epochs during which a fault or a move could leave the engine out of
    /// line with the store (a Redis loss, failover or lost replies, a move
    /// to the fallback), each with the first such cause.
    disturbed: std::collections::BTreeMap<u64, String>,
    /// Epochs two Redis primaries served at once (see
    /// [`History::two_primaries`]): the only ones whose orders an epoch
    /// advance may refuse as stale.
    two_primaries: std::collections::BTreeSet<u64>,
    /// Orders the store refused after an engine had accepted them.
    voided: Vec<Voided>,
    /// Buyers with a purchase whose outcome they never learned (no answer,
    /// or a 503 naming no order): an engine may have taken it.
    uncertain: std::collections::BTreeSet<String>,
    /// Buyers whose latest queue ticket was answered 404 `unknown_ticket`.
    unknown_tickets: Vec<String>,
    /// Whether Redis lost writes (a loss, or a failover to a replica
    /// behind).
    redis_lost_writes: bool,
    /// Every fault played, as it was played.
    faults: Vec<FaultSpan>,
    /// The sale's moves, each with its simulated instant.
    moves: Vec<(u64, Move)>,
}

impl Inner {
    /// Hashes the current instant's lines, sorted.
    fn close_instant(&mut self) {
        let mut lines = std::mem::take(&mut self.instant.1);
        lines.sort();
        for line in lines {
            self.hash.update(line.as_bytes());
            self.hash.update(b"\n");
        }
    }

    fn hash(&self) -> String {
        let mut this = Inner {
            hash: self.hash.clone(),
            instant: self.instant.clone(),
            ..Inner::default()
        };
        this.close_instant();
        hex::encode(this.hash.finalize())
    }
}

/// How many lines the log keeps for printing (all are hashed).
const KEPT: usize = 200_000;

impl History {
    /// Adds a line at `at_ms` (simulated ms since the start).
    pub fn log(&self, at_ms: u64, line: impl AsRef<str>) {
        self.latest_ms.fetch_max(at_ms, Ordering::Relaxed);
        let mut inner = self.inner.lock();
        let mut text = String::new();
        let _ = write!(text, "{at_ms:>9} {}", line.as_ref());
        if inner.instant.0 != at_ms {
            inner.close_instant();
            inner.instant.0 = at_ms;
        }
        inner.instant.1.push(text.clone());
        if inner.lines.len() < KEPT {
            inner.lines.push(text);
        }
    }

    /// The latest simulated ms a line was logged at.
    pub fn latest_ms(&self) -> u64 {
        self.latest_ms.load(Ordering::Relaxed)
    }

    /// The last `n` lines kept, or none if the log stays locked for a
    /// second (a run blocked while logging).
    pub fn last_lines(&self, n: usize) -> Vec<String> {
        self.inner
            .try_lock_for(std::time::Duration::from_secs(1))
            .map(|inner| inner.lines[inner.lines.len().saturating_sub(n)..].to_vec())
            .unwrap_or_default()
    }

    /// Records an order named to a buyer.
    pub fn named(&self, named: Named) {
        self.inner.lock().named.push(named);
    }

    /// Records a purchase's answer for the window checks.
    pub fn judged(&self, judged: Judged) {
        self.inner.lock().judged.push(judged);
    }

    /// Every purchase's answer.
    pub fn judged_answers(&self) -> Vec<Judged> {
        self.inner.lock().judged.clone()
    }

    /// Records a confirm answered `confirmed`.
    pub fn confirmed(&self, order: &str) {
        self.inner.lock().confirmed.push(order.to_owned());
    }

    /// Records a cancel answered 200.
    pub fn cancelled(&self, order: &str) {
        self.inner.lock().cancelled.push(order.to_owned());
    }

    /// Records an `order_failed` answer naming `order`.
    pub fn failed(&self, order: &str) {
        self.inner.lock().failed.push(order.to_owned());
    }

    /// Records a draw entry named to its buyer.
    pub fn entered(&self, entry: &str) {
        self.inner.lock().entered.push(entry.to_owned());
    }

    /// The draw entries named to buyers.
    pub fn entries(&self) -> Vec<String> {
        self.inner.lock().entered.clone()
    }

    /// The sale is under `epoch` from now (a rebuild, a move to the
    /// fallback): the latest epoch logged counts.
    pub fn epoch(&self, epoch: u64) {
        let mut inner = self.inner.lock();
        inner.epoch = inner.epoch.max(epoch);
    }

    /// Something that may leave the engine out of line with the store
    /// happened under the sale's current epoch.
    pub fn disturbed(&self, why: &str) {
        // A sale starts under the first epoch, before any rebuild logs one.
        let epoch = self
            .inner
            .lock()
            .epoch
            .max(stockade_core::Epoch::FIRST.get());
        self.disturbed_epoch(epoch, why);
    }

    /// Something that may leave the engine out of line with the store
    /// happened under `epoch`.
    pub fn disturbed_epoch(&self, epoch: u64, why: &str) {
        self.inner
            .lock()
            .disturbed
            .entry(epoch)
            .or_insert_with(|| why.to_owned());
    }

    /// Two Redis primaries served at once under `epoch` (a failover's
    /// deposed primary was still written): the rebuilds each side made
    /// advanced the epoch under the other's orders, which the store then
    /// refuses as stale. No other fault does that: a rebuild closes the
    /// engine and waits for every instance's writer before it advances.
    pub fn two_primaries(&self, epoch: u64) {
        self.disturbed_epoch(epoch, "two primaries after a failover");
        self.inner.lock().two_primaries.insert(epoch);
    }

    /// The epochs two primaries served at once.
    pub fn two_primaries_epochs(&self) -> std::collections::BTreeSet<u64> {
        self.inner.lock().two_primaries.clone()
    }

    /// The epochs something disturbed, each with its first cause.
    pub fn disturbed_epochs(&self) -> std::collections::BTreeMap<u64, String> {
        self.inner.lock().disturbed.clone()
    }

    /// Redis loses writes now (`why`: a loss, or a failover to a replica
    /// behind), which disturbs the current epoch too.
    pub fn redis_lost_writes_now(&self, why: &str) {
        self.inner.lock().redis_lost_writes = true;
        self.disturbed(why);
    }

    /// Records a fault as it was played.
    pub fn fault(&self, span: FaultSpan) {
        self.inner.lock().faults.push(span);
    }

    /// The faults played so far, in the order they healed (a fault is
    /// recorded once it heals; the end is judged after every one has).
    pub fn faults(&self) -> Vec<FaultSpan> {
        self.inner.lock().faults.clone()
    }

    /// Records a move of the sale's authority at `at_ms`.
    pub fn moved(&self, at_ms: u64, to: Move) {
        self.inner.lock().moves.push((at_ms, to));
    }

    /// The sale's moves, in order.
    pub fn moves(&self) -> Vec<(u64, Move)> {
        self.inner.lock().moves.clone()
    }

    /// Whether an order named to a client at `named_ms` and not committed
    /// may have been lost as docs/consistency.md says a pending order may
    /// be ("What can still lose a pending order"): Redis lost writes in the
    /// run, and an instance was crashed or stopped after it was named.
    pub fn pending_order_may_be_lost(&self, named_ms: u64) -> bool {
        let inner = self.inner.lock();
        let down = |f: &FaultSpan| matches!(f.fault, Fault::Restart(..) | Fault::Crash(..));
        inner.redis_lost_writes
            && inner
                .faults
                .iter()
                .any(|f| down(f) && f.from_ms >= named_ms)
    }

    /// Whether Redis lost writes in this run: what it held of orders not
    /// yet in the store (their outbox entries, holdings, keys) and of
    /// admissions went with them. (Not read from the disturbed epochs,
    /// which keep only each epoch's first cause: seed 0x5eed037b's
    /// failover came after lost replies under the same epoch.)
    pub fn redis_lost_writes(&self) -> bool {
        self.inner.lock().redis_lost_writes
    }

    /// Records that the ticket of `user`'s latest join was answered 404.
    pub fn unknown_ticket(&self, user: &str) {
        self.inner.lock().unknown_tickets.push(user.to_owned());
    }

    /// The buyers whose latest ticket was answered 404, once per answer.
    pub fn unknown_tickets(&self) -> Vec<String> {
        self.inner.lock().unknown_tickets.clone()
    }

    /// Records that `user` never learned how a purchase of theirs ended.
    pub fn uncertain(&self, user: &str) {
        self.inner.lock().uncertain.insert(user.to_owned());
    }

    /// The buyers with a purchase whose outcome they never learned.
    pub fn uncertain_buyers(&self) -> std::collections::BTreeSet<String> {
        self.inner.lock().uncertain.clone()
    }

    /// Records an order the store refused after an engine accepted it.
    pub fn voided(&self, voided: Voided) {
        self.inner.lock().voided.push(voided);
    }

    /// The orders the store refused after an engine accepted them.
    pub fn voided_orders(&self) -> Vec<Voided> {
        self.inner.lock().voided.clone()
    }

    /// The orders answered `order_failed`.
    pub fn failed_orders(&self) -> Vec<String> {
        self.inner.lock().failed.clone()
    }

    /// Records an answer no client may get.
    pub fn unexpected(&self, what: String) {
        self.inner.lock().unexpected.push(what);
    }

    /// Records a span that closed at `at_ms` without saying what happened.
    pub fn broken_span(&self, at_ms: u64, what: String) {
        self.inner.lock().broken_spans.push((at_ms, what));
    }

    /// The spans that closed without saying what happened, but those
    /// closed while an instance was down: a crash or a stop ends its
    /// commits where they stand (a real process that dies sends none of
    /// its open spans).
    pub fn broken_spans(&self) -> Vec<String> {
        let inner = self.inner.lock();
        inner
            .broken_spans
            .iter()
            .filter(|(at, _)| {
                !inner.faults.iter().any(|f| {
                    matches!(f.fault, Fault::Crash(..) | Fault::Restart(..))
                        && (f.from_ms..=f.to_ms).contains(at)
                })
            })
            .map(|(at, what)| format!("at {at} ms: {what}"))
            .collect()
    }

    /// The hash of every line so far, in hex: of the lines of each
    /// instant in sorted order, so that two tasks woken at the same instant
    /// may log in either order (see docs/testing.md), while any other
    /// difference (an answer, an order id, an instant) changes it.
    pub fn hash(&self) -> String {
        self.inner.lock().hash()
    }

    /// The kept lines.
    pub fn lines(&self) -> Vec<String> {
        self.inner.lock().lines.clone()
    }

    /// The orders named to buyers.
    pub fn named_orders(&self) -> Vec<Named> {
        self.inner.lock().named.clone()
    }

    /// The orders confirms answered `confirmed`.
    pub fn confirmed_orders(&self) -> Vec<String> {
        self.inner.lock().confirmed.clone()
    }

    /// The orders cancels answered 200.
    pub fn cancelled_orders(&self) -> Vec<String> {
        self.inner.lock().cancelled.clone()
    }

    /// The answers no client may get.
    pub fn unexpected_answers(&self) -> Vec<String> {
        self.inner.lock().unexpected.clone()
    }
}
