//! The Lua scripts, one per operation, run with EVALSHA (and reloaded
//! transparently after `SCRIPT FLUSH` or a restart, by [`redis::Script`]).
//! The scripts that draw fencing tokens or touch the queue of waiters start
//! with the shared functions of `lua/queue.lua`. Connecting loads them all
//! (one round trip), so that the first use of each does not cost a NOSCRIPT
//! error and a second round trip.

use std::sync::LazyLock;

use redis::Script;

/// SET NX PX + fencing token: see `lua/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(ACQUIRE_CODE));
const ACQUIRE_CODE: &str = concat!(
    include_str!("lua/queue.lua"),
    include_str!("lua/acquire.lua")
);

/// Compare-and-hand-off (or delete): see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE_CODE));
const RELEASE_CODE: &str = concat!(
    include_str!("lua/queue.lua"),
    include_str!("lua/release.lua")
);

/// A queued waiter's check on its place: see `lua/wait.lua`.
pub(crate) static WAIT: LazyLock<Script> = LazyLock::new(|| Script::new(WAIT_CODE));
const WAIT_CODE: &str = concat!(include_str!("lua/queue.lua"), include_str!("lua/wait.lua"));

/// A queued waiter giving up: see `lua/leave.lua`.
pub(crate) static LEAVE: LazyLock<Script> = LazyLock::new(|| Script::new(LEAVE_CODE));
const LEAVE_CODE: &str = concat!(include_str!("lua/queue.lua"), include_str!("lua/leave.lua"));

/// Compare-and-extend: see `lua/extend.lua`.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_CODE));
const EXTEND_CODE: &str = include_str!("lua/extend.lua");

/// Compare-and-raise of a node's fencing counter (Redlock): see
/// `lua/raise_fence.lua`.
pub(crate) static RAISE_FENCE: LazyLock<Script> = LazyLock::new(|| Script::new(RAISE_FENCE_CODE));
const RAISE_FENCE_CODE: &str = include_str!("lua/raise_fence.lua");

/// The source of every script, for `SCRIPT LOAD` when connecting.
pub(crate) const ALL: [&str; 6] = [
    ACQUIRE_CODE,
    RELEASE_CODE,
    WAIT_CODE,
    LEAVE_CODE,
    EXTEND_CODE,
    RAISE_FENCE_CODE,
];
