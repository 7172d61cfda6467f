//! The table of `stockade serve`'s settings, read from their declarations
//! (clap's view of [`RawConfig`]): each setting's file key, flag,
//! variable, default and help. The summary after `serve --help`, the
//! README's table ([`markdown_table`]) and the names in error messages
//! ([`Sources`](super::Sources)) all come from it, so nothing can drift.

use std::sync::LazyLock;

use clap::Args as _;

use super::RawConfig;

/// One setting, as declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The key in the TOML file, also the field's name.
    pub key: &'static str,
    /// The command-line flag, if there is one (the admin token has none: it
    /// would show in `ps`).
    pub flag: Option<&'static str>,
    /// The environment variable.
    pub env: &'static str,
    /// The default, if it is a value (else the help says what happens).
    pub default: Option<&'static str>,
    /// What the flag's value is called in `--help` (ADDR, MS...).
    pub value_name: Option<&'static str>,
    /// The help text: the field's doc comment.
    pub help: String,
}

/// clap's command of the settings alone (its arguments live as long as the
/// program, so the table can borrow them).
static COMMAND: LazyLock<clap::Command> =
    LazyLock::new(|| RawConfig::augment_args(clap::Command::new("serve")));

/// Every setting of `stockade serve`, in `--help` order.
pub static SETTINGS: LazyLock<Vec<Setting>> =
    LazyLock::new(|| COMMAND.get_arguments().map(Setting::of).collect());

impl Setting {
    fn of(arg: &'static clap::Arg) -> Self {
        let key = arg.get_id().as_str();
        // Leaked once per setting, for the life of the program like the table.
        let flag = arg
            .get_long()
            .filter(|_| !arg.is_hide_set())
            .map(|long| &*Box::leak(format!("--{long}").into_boxed_str()));
        Self {
            key,
            flag,
            env: arg
                .get_env()
                .and_then(|env| env.to_str())
                .unwrap_or_else(|| panic!("setting {key} declares no env = \"STOCKADE_...\"")),
            default: arg.get_default_values().first().and_then(|d| d.to_str()),
            value_name: arg
                .get_value_names()
                .and_then(|names| names.first())
                .map(|name| name.as_str()),
            help: arg
                .get_long_help()
                .or(arg.get_help())
                .map(ToString::to_string)
                .unwrap_or_default(),
        }
    }
}

/// The row of `key`.
///
/// # Panics
/// If `key` has no row: a programming error the tests catch.
pub fn setting_of(key: &str) -> &'static Setting {
    SETTINGS
        .iter()
        .find(|s| s.key == key)
        .unwrap_or_else(|| panic!("setting {key:?} is declared in no group of config::RawConfig"))
}

/// The summary after `stockade serve --help`: every setting's flag,
/// variable, file key and default, the settings that have no flag included.
pub fn help_table() -> String {
    let mut text = String::from(
        "Settings: flag, environment variable, config-file key (--config FILE) and default.\n\
         Flags win over variables, variables over the file, the file over defaults.\n\n",
    );
    for s in SETTINGS.iter() {
        text.push_str(&format!(
            "  {:<29} {:<36} {:<26} {}\n",
            s.flag.unwrap_or("(no flag)"),
            s.env,
            s.key,
            s.default.unwrap_or("-")
        ));
    }
    text
}

/// The README's table of settings: flag, variable, file key, default and
/// help, one row per setting.
pub fn markdown_table() -> String {
    let cell = |text: &str| {
        text.replace('|', "\\|")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut table = String::from(
        "| flag | variable | file key | default | what it sets |\n| --- | --- | --- | --- | --- |\n",
    );
    for s in SETTINGS.iter() {
        let flag = match (s.flag, s.value_name) {
            (Some(flag), Some(value)) => format!("`{}`", cell(&format!("{flag} {value}"))),
            (Some(flag), None) => format!("`{flag}`"),
            (None, _) => "(none)".to_owned(),
        };
        let default = s
            .default
            .map_or_else(|| "-".to_owned(), |d| format!("`{}`", cell(d)));
        table.push_str(&format!(
            "| {flag} | `{}` | `{}` | {default} | {} |\n",
            s.env,
            s.key,
            cell(&s.help)
        ));
    }
    table
}

/// The config-file keys, comma-separated.
pub fn file_keys() -> String {
    SETTINGS
        .iter()
        .map(|s| s.key)
        .collect::<Vec<_>>()
        .join(", ")
}
