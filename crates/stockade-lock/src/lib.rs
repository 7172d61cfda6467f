//! A Redis distributed lock with fencing tokens, a lease watchdog, pub/sub
//! hand-off and Redlock, for tokio services.
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
//!   `INCR` of the lock's fencing counter. The token is 128 random bits; the
//!   [fencing token](FencingToken) only ever grows.
//! - **Release** deletes the key only if it still holds this guard's token
//!   (and then PUBLISHes on the lock's channel). Releasing a lock that was
//!   lost is reported as [`LockError::NotHeld`]; another holder's lock is
//!   never deleted. Dropping a guard releases in a background task.
//! - **Waiting** does not poll. A waiter subscribes to the lock's channel
//!   (one pub/sub connection per client and node, shared by all waiters) and
//!   retries when a release is announced, or when the holder's lease runs out
//!   (capped by [`LocksBuilder::max_fallback_retry`]), whichever is first.
//!   Dropping a waiting or acquiring future never leaves a lock behind: an
//!   attempt that is dropped after its request was sent gives back, from a
//!   background task, whatever it may have been granted (a compare-and-delete
//!   with its own token, which runs after the acquire on the same connection).
//! - **Watchdog**: with [`Lease::Watchdog`] the lease is extended every
//!   third of it, by a compare-and-extend script. [`LockGuard::lost`]
//!   completes when the lock is found gone or cannot be extended in time, and
//!   [`Locks::run`] cancels the critical section then.
//! - **Redlock**: give [`LocksBuilder`] several independent nodes and every
//!   operation needs a majority of them; validity is `lease − elapsed −
//!   drift`.
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
//! - [`client`](Locks): [`Locks`]: `try_lock`, `lock_with`, `lock`, `run`,
//!   and the waiting loop.
//! - `config`: [`LocksBuilder`] and [`Lease`].
//! - `guard`: [`LockGuard`], its validity and its `lost()` signal.
//! - `watchdog`: lease extension for [`Lease::Watchdog`].
//! - `quorum`: acquire, extend and release across nodes, by majority.
//! - `node`: one node's connection and the script calls.
//! - `subscriptions`: the shared pub/sub connection and waiter wake-ups.
//! - `scripts` and `lua/*.lua`: one Lua script per operation.
//! - `keys`: the key, counter and channel names of a lock.
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
