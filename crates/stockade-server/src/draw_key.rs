//! The deployment's draw key ([`stockade_core::draw::seal`]): the seeds of
//! draw sales follow from it and a nonce the store keeps, so the store
//! alone never tells a draw before its entries close.
//!
//! Set (`STOCKADE_DRAW_KEY` or its `_FILE`), every instance uses it: they
//! must all have the same. Unset on the embedded default (a SQLite store,
//! one instance), a key is generated once and kept in the data directory
//! (`draw.key`, readable by its owner only), not in the store. Unset on a
//! PostgreSQL store, which several instances may share, there is none:
//! such instances could not agree on a seed, so draw sales are refused at
//! creation until the key is set (a race sale needs no key).

use std::io::Write as _;
use std::path::Path;

use stockade_core::draw::DrawKey;

use crate::config::{ServerConfig, StoreLocation};

/// The file of the embedded default's generated key, in the data directory.
pub const FILE: &str = "draw.key";

/// The draw key this instance uses: the configured one, the data
/// directory's on SQLite (made on first use), else None.
pub fn for_store(config: &ServerConfig) -> Result<Option<DrawKey>, String> {
    if let Some(key) = config.draw_key() {
        return Ok(Some(key.clone()));
    }
    match config.store() {
        StoreLocation::Sqlite(_) => kept_in(config.data_dir()).map(Some),
        StoreLocation::Postgres(_) => Ok(None),
    }
}

/// The key kept in `dir`, generated and written there first if there is
/// none yet.
fn kept_in(dir: &Path) -> Result<DrawKey, String> {
    let path = dir.join(FILE);
    let shown = || path.display().to_string();
    match std::fs::read(&path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes).trim().as_bytes().to_vec();
            DrawKey::new(text).map_err(|reason| {
                format!(
                    "{}: {reason}; set STOCKADE_DRAW_KEY, or remove the file only if no draw sale is open (their draws need it)",
                    shown()
                )
            })
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let key = DrawKey::random();
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options
                .open(&path)
                .map_err(|e| format!("cannot create {}: {e}", shown()))?;
            file.write_all(key.expose())
                .and_then(|()| file.sync_all())
                .map_err(|e| format!("cannot write {}: {e}", shown()))?;
            Ok(key)
        }
        Err(error) => Err(format!("cannot read {}: {error}", shown())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_directory_key_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = kept_in(dir.path()).unwrap();
        assert_eq!(kept_in(dir.path()).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.path().join(FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o077, 0, "only its owner reads the key");
        }
        std::fs::write(dir.path().join(FILE), "short").unwrap();
        let error = kept_in(dir.path()).unwrap_err();
        assert!(error.contains("at least 32 bytes"), "{error}");
    }
}
