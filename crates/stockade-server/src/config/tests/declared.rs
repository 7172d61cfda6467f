//! The declarations and what is made of them: the README's table, the
//! defaults, the layers' precedence, clap's command line.

use std::path::Path;
use std::time::Duration;

use clap::{Args as _, FromArgMatches as _};

use super::{env, flags};
use crate::config::settings::{SETTINGS, markdown_table};
use crate::config::{CommandLineSettings, RawConfig, ServerConfig};

/// The README's settings table sits between these lines.
const TABLE_START: &str = "<!-- settings table: generated from the declarations in crates/stockade-server/src/config -->\n";
const TABLE_END: &str = "<!-- end of the settings table -->\n";

#[test]
fn the_readme_settings_table_is_the_generated_one() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme
        .find(TABLE_START)
        .map(|at| at + TABLE_START.len())
        .unwrap_or_else(|| panic!("README.md has no line {TABLE_START:?}"));
    let end = start
        + readme[start..]
            .find(TABLE_END)
            .unwrap_or_else(|| panic!("README.md has no line {TABLE_END:?}"));
    let generated = markdown_table();
    if readme[start..end] == generated {
        return;
    }
    if std::env::var_os("UPDATE_README").is_some() {
        let updated = format!("{}{generated}{}", &readme[..start], &readme[end..]);
        std::fs::write(&path, updated).unwrap();
        return;
    }
    panic!(
        "README.md's settings table is not the one the settings declare (a setting added, \
         renamed or re-documented?): regenerate it with \
         `UPDATE_README=1 cargo nextest run -p stockade-server --lib readme` and commit README.md"
    );
}

#[test]
fn every_setting_is_in_the_readme_table_with_its_three_spellings() {
    let table = markdown_table();
    let keys: Vec<&str> = RawConfig::keys().collect();
    assert_eq!(keys.len(), SETTINGS.len());
    for row in SETTINGS.iter() {
        let line = table
            .lines()
            .find(|l| l.contains(&format!("| `{}` | `{}` |", row.env, row.key)))
            .unwrap_or_else(|| panic!("{} is missing from the table:\n{table}", row.key));
        if let Some(flag) = row.flag {
            assert!(line.starts_with(&format!("| `{flag}")), "{line}");
        } else {
            assert!(line.starts_with("| (none) |"), "{line}");
        }
        assert!(!row.help.is_empty(), "{} has no doc comment", row.key);
    }
}

#[test]
fn every_default_parses_and_is_the_one_the_code_assumes() {
    let defaults = RawConfig::defaults();
    let config = ServerConfig::resolve(RawConfig::default(), RawConfig::default(), None).unwrap();
    let writer = crate::writer::WriterConfig::default();
    assert_eq!(config.writer().max_batch, writer.max_batch);
    assert_eq!(config.writer().max_delay, writer.max_delay);
    assert_eq!(config.rejection_ttl(), crate::sale_book::DEFAULT_TTL);
    assert_eq!(
        config.max_purchases_in_flight(),
        crate::shedding::DEFAULT_MAX_IN_FLIGHT
    );
    assert_eq!(config.http(), crate::listener::HttpLimits::default());
    assert_eq!(
        defaults.redis.redis_key_prefix.as_deref(),
        Some(crate::config::RedisKeyPrefix::DEFAULT)
    );
    // A setting without a value for default is not set by the defaults.
    for row in SETTINGS.iter() {
        assert_eq!(
            defaults.given().any(|key| key == row.key),
            row.default.is_some(),
            "{}",
            row.key
        );
    }
}

/// One setting of each group, read back from the [`ServerConfig`].
type Read = fn(&ServerConfig) -> String;
const ONE_OF_EACH_GROUP: &[(&str, [&str; 4], Read)] = &[
    // (key, [flag, variable, file, default] values, how to read it back)
    (
        "listen",
        [
            "127.0.0.1:9001",
            "127.0.0.1:9002",
            "127.0.0.1:9003",
            "127.0.0.1:8080",
        ],
        |c| c.listen().to_string(),
    ),
    (
        "data_dir",
        ["/tmp/f", "/tmp/e", "/tmp/c", "./stockade-data"],
        |c| c.data_dir().display().to_string(),
    ),
    ("commit_deadline_ms", ["31", "32", "33", "2000"], |c| {
        c.commit_deadline().as_millis().to_string()
    }),
    (
        "admission_secret",
        [
            "flag-0123456789abcdef0123456789abcdef",
            "env-0123456789abcdef0123456789abcdef",
            "file-0123456789abcdef0123456789abcdef",
            "",
        ],
        |c| match c.admission_secret().generated {
            true => String::new(),
            false => String::from_utf8(c.admission_secret().key.expose().clone()).unwrap(),
        },
    ),
    ("jwt_issuer", ["flag-iss", "env-iss", "file-iss", ""], |c| {
        let shown = format!("{:?}", c.identity());
        ["flag-iss", "env-iss", "file-iss"]
            .into_iter()
            .find(|issuer| shown.contains(issuer))
            .unwrap_or_default()
            .to_owned()
    }),
    ("rate_limit_instances", ["4", "5", "6", "1"], |c| {
        c.rate_limits().instances.to_string()
    }),
    ("metrics_retention_s", ["41", "42", "43", "900"], |c| {
        c.metrics_retention().as_secs().to_string()
    }),
];

#[test]
fn a_flag_beats_a_variable_beats_the_file_beats_the_default() {
    let dir = tempfile::tempdir().unwrap();
    for (key, [flag, variable, file_value, default], read) in ONE_OF_EACH_GROUP {
        let row = crate::config::settings::setting_of(key);
        let file = dir.path().join(format!("{key}.toml"));
        let literal = if file_value.parse::<u64>().is_ok() {
            file_value.to_string()
        } else {
            format!("{file_value:?}")
        };
        // jwt_issuer needs a way to verify tokens, given at the lowest layer.
        let base = |mut file_text: String| {
            if *key == "jwt_issuer" {
                file_text.push_str("jwt_secret = \"0123456789abcdef0123456789abcdef\"\n");
            }
            file_text
        };
        std::fs::write(&file, base(format!("{key} = {literal}\n"))).unwrap();
        let resolve = |flags: RawConfig, env: RawConfig, file: Option<&Path>| {
            let config =
                ServerConfig::resolve(flags, env, file).unwrap_or_else(|e| panic!("{key}: {e}"));
            read(&config)
        };
        let all = resolve(
            flags(&[(key, flag)]),
            env(&[(row.env, variable)]),
            Some(&file),
        );
        assert_eq!(all, *flag, "{key}: the flag wins");
        let no_flag = resolve(
            RawConfig::default(),
            env(&[(row.env, variable)]),
            Some(&file),
        );
        assert_eq!(no_flag, *variable, "{key}: then the variable");
        let file_only = resolve(RawConfig::default(), RawConfig::default(), Some(&file));
        assert_eq!(file_only, *file_value, "{key}: then the file");
        let empty = dir.path().join("empty.toml");
        std::fs::write(&empty, base(String::new())).unwrap();
        let none = resolve(RawConfig::default(), RawConfig::default(), Some(&empty));
        assert_eq!(none, *default, "{key}: then the default");
    }
    assert_eq!(
        ServerConfig::resolve(
            RawConfig::default(),
            env(&[("STOCKADE_COMMIT_DEADLINE_MS", "1500")]),
            None
        )
        .unwrap()
        .commit_deadline(),
        Duration::from_millis(1_500)
    );
}

/// `stockade serve`'s settings on a command line (no variable is read:
/// clap reads them when the arguments are made, and none is looked at
/// here but what the flags give).
fn command_line(args: &[&str]) -> Result<CommandLineSettings, clap::Error> {
    let command = CommandLineSettings::augment_args(clap::Command::new("serve"));
    let matches =
        command.try_get_matches_from(std::iter::once("serve").chain(args.iter().copied()))?;
    CommandLineSettings::from_arg_matches(&matches)
}

#[test]
fn the_command_line_keeps_flags_apart_and_names_a_bad_value_by_its_flag() {
    let given = command_line(&["--listen", "127.0.0.1:9001", "--batch-max", "9"]).unwrap();
    assert_eq!(
        given.flags,
        flags(&[("listen", "127.0.0.1:9001"), ("batch_max", "9")])
    );
    // Defaults are not flags: the file may still set them.
    assert!(!given.flags.given().any(|key| key == "commit_deadline_ms"));
    let err = command_line(&["--batch-max", "lots"])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("error: invalid setting --batch-max: \"lots\" is not a whole number"),
        "{err}"
    );
    // The admin token and the admission secret are never flags.
    for (flag, variable) in [
        ("--admin-token", "STOCKADE_ADMIN_TOKEN"),
        ("--admission-secret", "STOCKADE_ADMISSION_SECRET"),
    ] {
        let err = command_line(&[flag, "0123456789abcdef0123456789abcdef"])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("error: invalid setting {flag}: is not a flag")),
            "{err}"
        );
        assert!(err.contains(variable), "{err}");
    }
}

#[test]
fn a_bad_file_is_named_with_the_line_of_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stockade.toml");
    let error = |text: &str| {
        std::fs::write(&file, text).unwrap();
        RawConfig::from_file(&file).unwrap_err().to_string()
    };
    let at = |line: u32| {
        format!(
            "invalid setting --config {} (line {line}): ",
            file.display()
        )
    };
    let err = error("listen = \"127.0.0.1:0\"\n\nlisen = 3\n");
    assert!(
        err.starts_with(&format!("{}unknown field `lisen`", at(3))),
        "{err}"
    );
    assert!(err.contains("the keys are: listen, "), "{err}");
    let err = error("listen = \"127.0.0.1:0\"\nengine = \"memory\"\nbatch_max = \"x\"\n");
    assert!(err.starts_with(&at(3)), "{err}");
    let err = error("listen = \"127.0.0.1:0\"\nbatch_max = [\n");
    assert!(err.starts_with(&at(2)), "{err}");
}
