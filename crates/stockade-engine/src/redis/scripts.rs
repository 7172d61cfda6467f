//! The Lua scripts, one per operation, as one library (`stockade_engine`,
//! see [`super::library`]), and how Redis errors map to engine errors.
//!
//! Each script runs as a function of the library (`FCALL`) or with
//! EVALSHA, as the connection chose; either way a script the server lacks
//! (after `FUNCTION FLUSH`, `SCRIPT FLUSH` or a restart) is loaded and the
//! call retried, so callers never see it.

use std::sync::LazyLock;

use redis::{ErrorKind, RedisError, ServerErrorKind};
use stockade_core::EngineError;

use super::library::{Library, LibraryScript};

/// The engine's scripts, by name.
pub(super) static ENGINE_LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    Library::new(
        "stockade_engine",
        &[
            ("create_sale", include_str!("../../lua/create_sale.lua")),
            ("purchase", include_str!("../../lua/purchase.lua")),
            ("release_many", include_str!("../../lua/release_many.lua")),
            ("close", include_str!("../../lua/close.lua")),
            ("retire", include_str!("../../lua/retire.lua")),
            ("rebuild_begin", include_str!("../../lua/rebuild_begin.lua")),
            ("rebuild_chunk", include_str!("../../lua/rebuild_chunk.lua")),
            (
                "rebuild_finish",
                include_str!("../../lua/rebuild_finish.lua"),
            ),
            ("take", include_str!("../../lua/take.lua")),
            ("give", include_str!("../../lua/give.lua")),
            ("untake", include_str!("../../lua/untake.lua")),
        ],
    )
});

fn script(name: &str) -> LibraryScript {
    ENGINE_LIBRARY.script(name)
}

pub(super) static CREATE_SALE: LazyLock<LibraryScript> = LazyLock::new(|| script("create_sale"));
pub(super) static PURCHASE: LazyLock<LibraryScript> = LazyLock::new(|| script("purchase"));
pub(super) static RELEASE_MANY: LazyLock<LibraryScript> = LazyLock::new(|| script("release_many"));
pub(super) static CLOSE: LazyLock<LibraryScript> = LazyLock::new(|| script("close"));
pub(super) static RETIRE: LazyLock<LibraryScript> = LazyLock::new(|| script("retire"));
pub(super) static REBUILD_BEGIN: LazyLock<LibraryScript> =
    LazyLock::new(|| script("rebuild_begin"));
pub(super) static REBUILD_CHUNK: LazyLock<LibraryScript> =
    LazyLock::new(|| script("rebuild_chunk"));
pub(super) static REBUILD_FINISH: LazyLock<LibraryScript> =
    LazyLock::new(|| script("rebuild_finish"));
pub(super) static TAKE: LazyLock<LibraryScript> = LazyLock::new(|| script("take"));
pub(super) static GIVE: LazyLock<LibraryScript> = LazyLock::new(|| script("give"));
pub(super) static UNTAKE: LazyLock<LibraryScript> = LazyLock::new(|| script("untake"));

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
