//! How a setting's text (a flag's value, a variable, a default) becomes its
//! value. One parser per value type, used by clap and by
//! [`RawConfig::from_env`](super::RawConfig::from_env) alike, so a bad
//! value reads the same whichever way it came, and names the setting the
//! way it was given.

use std::ffi::OsStr;
use std::marker::PhantomData;
use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::parser::ValueSource;

use super::ConfigError;

/// A type a setting's value can have.
pub trait SettingValue: Sized + Clone + Send + Sync + 'static {
    /// The value `text` gives, or why it gives none.
    fn parse(text: &OsStr) -> Result<Self, String>;
}

impl SettingValue for String {
    fn parse(text: &OsStr) -> Result<Self, String> {
        text.to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{text:?} is not UTF-8 text"))
    }
}

/// Any path, the empty one included: the setting's own check says what an
/// empty one means (`data_dir` refuses it, the secret files ignore it).
impl SettingValue for PathBuf {
    fn parse(text: &OsStr) -> Result<Self, String> {
        Ok(PathBuf::from(text))
    }
}

impl SettingValue for u64 {
    fn parse(text: &OsStr) -> Result<Self, String> {
        whole_number(text)
    }
}

impl SettingValue for usize {
    fn parse(text: &OsStr) -> Result<Self, String> {
        whole_number(text)
    }
}

fn whole_number<N: std::str::FromStr>(text: &OsStr) -> Result<N, String> {
    text.to_str()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| format!("{text:?} is not a whole number"))
}

/// clap's parser of every setting ([`settings_group!`](super::group)
/// gives it to each): [`SettingValue::parse`], its error naming the flag or
/// the variable the value came from. A hidden setting is a secret that
/// must not show in `ps`: its flag exists only to refuse it.
#[derive(Debug)]
pub struct Parser<T>(PhantomData<fn() -> T>);

impl<T> Clone for Parser<T> {
    fn clone(&self) -> Self {
        Self(PhantomData)
    }
}

/// The parser of settings of type `T`.
pub fn parser<T: SettingValue>() -> Parser<T> {
    Parser(PhantomData)
}

impl<T: SettingValue> TypedValueParser for Parser<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        self.parse_ref_(cmd, arg, value, ValueSource::CommandLine)
    }

    fn parse_ref_(
        &self,
        _cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
        source: ValueSource,
    ) -> Result<T, clap::Error> {
        let refused = |setting: String, reason: String| {
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!("{}\n", ConfigError { setting, reason }),
            )
        };
        // Every setting is an argument (None is an external subcommand's).
        let Some(arg) = arg else {
            return T::parse(value)
                .map_err(|reason| clap::Error::raw(ErrorKind::ValueValidation, reason));
        };
        let env = arg.get_env().and_then(OsStr::to_str).unwrap_or_default();
        let flag = arg
            .get_long()
            .map_or_else(|| arg.get_id().to_string(), |long| format!("--{long}"));
        if source == ValueSource::CommandLine && arg.is_hide_set() {
            return Err(refused(
                flag,
                format!(
                    "is not a flag, as a flag would show in `ps`: set {env}, or {} in the --config file",
                    arg.get_id()
                ),
            ));
        }
        let name = if source == ValueSource::EnvVariable {
            env.to_owned()
        } else {
            flag
        };
        T::parse(value).map_err(|reason| refused(name, reason))
    }
}
