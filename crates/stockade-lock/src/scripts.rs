//! The Lua scripts, one per operation, run with EVALSHA (and reloaded
//! transparently after `SCRIPT FLUSH` or a restart, by [`redis::Script`]).

use std::sync::LazyLock;

use redis::Script;

/// SET NX PX + fencing counter INCR: see `lua/acquire.lua`.
pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/acquire.lua")));

/// Compare-and-delete + PUBLISH: see `lua/release.lua`.
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/release.lua")));

/// Compare-and-extend: see `lua/extend.lua`.
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/extend.lua")));

/// Compare-and-raise of a node's fencing counter (Redlock): see
/// `lua/raise_fence.lua`.
pub(crate) static RAISE_FENCE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lua/raise_fence.lua")));
