//! Where each setting's value came from, to name it in errors the way the
//! user wrote it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::RawConfig;
use super::settings::setting_of;

/// Where each setting's value came from: `STOCKADE_COMMIT_DEADLINE_MS` for
/// a variable, `--commit-deadline-ms` for a flag, `commit_deadline_ms in
/// FILE` for the file, all three and the default for a default.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    flags: HashSet<&'static str>,
    env: HashSet<&'static str>,
    file: Option<(PathBuf, HashSet<&'static str>)>,
}

impl Sources {
    /// The sources of the three layers.
    pub fn new(flags: &RawConfig, env: &RawConfig, file: Option<(&Path, &RawConfig)>) -> Self {
        Self {
            flags: flags.given().collect(),
            env: env.given().collect(),
            file: file.map(|(path, raw)| (path.to_path_buf(), raw.given().collect())),
        }
    }

    /// Whether any layer set `key`.
    pub fn is_set(&self, key: &str) -> bool {
        self.flags.contains(key)
            || self.env.contains(key)
            || self
                .file
                .as_ref()
                .is_some_and(|(_, keys)| keys.contains(key))
    }

    /// The setting `key` as its value was given. A setting given as a flag
    /// that has none (a test's layer) is named by its variable.
    pub fn name(&self, key: &str) -> String {
        let row = setting_of(key);
        if self.flags.contains(key) {
            return row.flag.unwrap_or(row.env).to_owned();
        }
        if self.env.contains(key) {
            return row.env.to_owned();
        }
        if let Some((path, keys)) = &self.file
            && keys.contains(key)
        {
            return format!("{key} in {}", path.display());
        }
        let mut names: Vec<&str> = row.flag.into_iter().collect();
        names.extend([row.env, row.key]);
        match row.default {
            Some(default) => format!("{} (default {default})", names.join(" / ")),
            None => names.join(" / "),
        }
    }
}
