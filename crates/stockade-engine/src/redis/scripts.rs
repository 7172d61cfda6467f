//! The Lua scripts, one per operation, and how Redis errors map to engine
//! errors.
//!
//! [`redis::Script`] sends EVALSHA and, on NOSCRIPT (after `SCRIPT FLUSH` or
//! a restart), loads the script and retries, so callers never see the cache.

use std::sync::LazyLock;

use redis::{ErrorKind, RedisError, Script, ServerErrorKind};
use stockade_core::EngineError;

pub(super) static CREATE_SALE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/create_sale.lua")));
pub(super) static PURCHASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/purchase.lua")));
pub(super) static RELEASE_MANY: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/release_many.lua")));
pub(super) static CLOSE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/close.lua")));
pub(super) static RETIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/retire.lua")));
pub(super) static REBUILD_BEGIN: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rebuild_begin.lua")));
pub(super) static REBUILD_CHUNK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rebuild_chunk.lua")));
pub(super) static REBUILD_FINISH: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rebuild_finish.lua")));
pub(super) static TAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/take.lua")));
pub(super) static GIVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/give.lua")));
pub(super) static UNTAKE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/untake.lua")));

/// Sorts a Redis error into "retry later" (unavailable, timeout) and
/// "will not get better" (backend). A slot in migration or moved (TRYAGAIN,
/// ASK, MOVED left after the Cluster client's retries), a primary demoted
/// to replica (READONLY) or not yet confirmed (MASTERDOWN) are transient.
pub(super) fn redis_error(error: RedisError) -> EngineError {
    if error.is_timeout() {
        return EngineError::Timeout(error.to_string());
    }
    let transient = error.is_io_error()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
        || matches!(
            error.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::Moved
                    | ServerErrorKind::Ask
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
            )
        );
    if transient {
        EngineError::Unavailable(Box::new(error))
    } else {
        EngineError::Backend(Box::new(error))
    }
}
