//! A Redis distributed lock with fencing tokens, a lease watchdog, a FIFO
//! queue with direct hand-off, and Redlock, for tokio services.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let redis = stockade_test_support::RedisServer::start()?;
//! # let url = redis.url();
//! use std::time::Duration;
//! use stockade_lock::{Lease, Locks};
//!
//! let locks = Locks::connect(&url).await?;
//!
//! // Fail fast: None if someone else holds it.
//! let guard = locks.try_lock("warm-up", Lease::Watchdog).await?.expect("free");
//! println!("holding {} with fencing token {}", guard.name(), guard.fence());
//! assert!(locks.try_lock("warm-up", Lease::Watchdog).await?.is_none());
//! guard.release().await?;
//!
//! // Wait up to a second, for a lock leased for ten.
//! let guard = locks
//!     .lock_with("warm-up", Duration::from_secs(1), Duration::from_secs(10))
//!     .await?;
//! drop(guard); // released in the background
//!
//! // A critical section that is cancelled if the lock is lost.
//! let fence = locks.run("warm-up", async |guard| guard.fence()).await?;
//! println!("ran with token {fence}");
//! # Ok(()) }
//! ```
//!
//! # What it guarantees
//!
//! - **Acquire** is one script: `SET key token NX PX lease`, and on success
//!   a new fencing token. The token is 128 random bits; the
//!   [fencing token](FencingToken) only ever grows: it is
//!   `max(counter + 1, server clock in µs)`, so that a failover to a replica
//!   whose counter lags behind cannot hand out a token again (see
//!   `lua/queue.lua` for the argument).
//! - **Waiting is a queue.** A waiter that finds the lock held subscribes to
//!   its client's grant channel (one per client and node, on one pub/sub
//!   connection shared by all waiters of all locks) and `RPUSH`es an entry
//!   (`deadline:lease:client:token`) onto the lock's queue in Redis. Waiters
//!   are served first come, first served.
//! - **Release hands off.** The release script deletes the key only if it
//!   still holds this guard's token; if waiters are queued it instead makes
//!   the first live one the owner, with its own lease and a new fencing
//!   token, and tells it with one `PUBLISH` (`token fence time`) on its
//!   client's grant channel: only that client hears it, and routes it to
//!   that waiter where the connection reads it. One waiter wakes per
//!   release, and no other client; no one races. Entries whose deadline has passed (a waiter whose process
//!   died) are skipped. Releasing a lock that was lost is reported as
//!   [`LockError::NotHeld`]; another holder's lock is never touched.
//!   Dropping a guard releases in a background task.
//! - **Nothing hangs on one message.** A queued waiter checks its place again
//!   when the holder's lease runs out and at least every
//!   [`LocksBuilder::max_fallback_retry`]: the check takes a grant whose
//!   message was lost, grants a lock nobody released, and renews the entry's
//!   deadline (two re-check periods and a command timeout ahead). A granted
//!   waiter counts its validity from the last request it sent before the
//!   grant (it cannot know the moment of the grant better); if that leaves
//!   less than two thirds of the lease, it renews the lease once before
//!   returning the guard.
//! - **Cancellation**: dropping a waiting or acquiring future never leaves a
//!   lock or a queue entry behind. An attempt that is dropped after its
//!   request was sent gives back, from a background task, whatever it may
//!   have been granted; a queued waiter that gives up (wait over, or future
//!   dropped) leaves the queue, and if a grant raced its departure it passes
//!   the lock on to the next in line (or frees it). Commands go on the same
//!   connection, so the departure always runs after the request it undoes.
//! - **Watchdog**: with [`Lease::Watchdog`] the lease is extended every
//!   third of it, by a compare-and-extend script. [`LockGuard::lost`]
//!   completes when the lock is found gone or cannot be extended in time, and
//!   [`Locks::run`] cancels the critical section then.
//! - **Redlock**: give [`LocksBuilder`] several independent nodes and every
//!   operation needs a majority of them; validity is `lease − elapsed −
//!   drift`. Redlock waiters do not queue: a grant on one node is not a grant
//!   of the lock, and nodes could order the same waiters differently, so two
//!   waiters could each hold a minority. They are told of releases and try
//!   again with a jitter (see `client`).
//!
//! # What it does not guarantee: pauses, clocks, and why fencing tokens
//!
//! A lease-based lock only excludes holders that notice in time that their
//! lease ran out. A process paused after checking (a GC pause, a stalled VM,
//! a suspended task, a slow network) can wake up after its lease expired and
//! another client acquired the lock, and still act. Redlock adds clock
//! assumptions: validity is computed with this process's monotonic clock and
//! a drift allowance, and assumes the nodes' clocks run at about the same
//! rate; a node that restarts without persistence forgets the keys it held,
//! which can let a second client assemble a majority.
//!
//! No client-side cleverness closes these holes. Fencing tokens do: the
//! resource that the lock protects refuses a write whose token is smaller
//! than one it already accepted. This crate hands out the token and (feature
//! `postgres`) the helpers to enforce it in PostgreSQL; see
//! the `postgres` module when it is enabled.
//!
//! Fencing tokens with Redlock: each node has its own counter. The token of
//! an acquisition is the largest counter among the nodes that granted it,
//! and before the guard is returned those nodes' counters are raised to it
//! (compare-and-raise, one more round trip). Any later majority overlaps this
//! one in a node whose counter is at least the token, so it draws a larger
//! one. This holds while nodes keep their data; a node that lost its data
//! reseeds its counter from its clock (microseconds), which keeps tokens
//! growing unless that clock stepped back.
//!
//! # Layout
//!
//! - [`client`](Locks): [`Locks`]: connecting, `try_lock`, `lock_with`,
//!   `lock`, `run`, and one acquisition attempt.
//!   - `client::in_line`: one node: waiting in the lock's queue, taking the
//!     grant, leaving the queue on giving up.
//!   - `client::majority`: Redlock: waiting by retrying with a jitter on
//!     release messages.
//! - `config`: [`LocksBuilder`] and [`Lease`].
//! - `guard`: [`LockGuard`], its validity and its `lost()` signal.
//! - `watchdog`: lease extension for [`Lease::Watchdog`].
//! - `quorum`: acquire, extend and release across nodes, by majority.
//! - `node`: one node's connection and the script calls.
//! - `subscriptions`: the shared pub/sub connection: the client's grant
//!   channel, interests in a channel, and wake-ups.
//!   - `subscriptions::grants`: grant messages, routed to the one waiter
//!     that expects each.
//!   - `subscriptions::task`: the task that owns the connection (RESP3),
//!     subscribes and reconnects; messages are routed where the connection
//!     reads them.
//! - `scripts` and `lua/*.lua`: one Lua script per operation.
//! - `keys`: the key, counter, queue and channel names of a lock.
//! - [`fence`](FencingToken): [`FencingToken`].
//! - [`error`](LockError): [`LockError`] and [`ErrorKind`].
//! - [`telemetry`]: metric names and descriptions.
//! - `postgres` (feature `postgres`): fencing enforcement in PostgreSQL.

mod client;
mod config;
mod error;
mod fence;
mod guard;
mod keys;
mod node;
#[cfg(feature = "postgres")]
pub mod postgres;
mod quorum;
mod scripts;
mod subscriptions;
pub mod telemetry;
mod watchdog;

pub use client::Locks;
pub use config::{Lease, LocksBuilder};
pub use error::{ErrorKind, LockError, LostReason};
pub use fence::FencingToken;
pub use guard::LockGuard;
