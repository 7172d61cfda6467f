//! `settings_group!`: the one declaration of a group of settings.

/// Declares a group of settings: a struct whose every field is one setting
/// of type `Option<T>` (`T` a [`SettingValue`](super::values::SettingValue)).
/// The field's name is its config-file key (and clap's id), its doc comment
/// its `--help` text, its `#[arg(long, env = "STOCKADE_...")]` its flag and
/// variable, its `default_value` (if any) its default. A secret that must
/// never be a flag is `hide = true`: the flag then only refuses it.
///
/// The struct derives `clap::Args` and `serde::Deserialize`, and gets what
/// layering needs without naming a field again: `KEYS`, `or`, `given`,
/// `retain` and `set`. Every field is parsed by
/// [`values::parser`](super::values::parser), and no variable's value is
/// ever printed by `--help` (they hold passwords).
///
/// A field that holds a secret says so after its type: `as secret` (a
/// token or key: `Debug` shows `Some(<redacted>)`) or `as url` (a URL that
/// may carry a password: `Debug` shows it as
/// [`redact_url`](stockade_core::redact::redact_url) does). Every other
/// field's `Debug` is its value's.
macro_rules! settings_group {
    (
        $(#[$meta:meta])*
        pub struct $group:ident {
            $(
                $(#[$field_meta:meta])*
                pub $field:ident: Option<$ty:ty> $(as $shown:ident)?,
            )+
        }
    ) => {
        #[derive(Clone, Default, PartialEq, Eq, clap::Args, serde::Deserialize)]
        $(#[$meta])*
        pub struct $group {
            $(
                $(#[$field_meta])*
                #[arg(
                    value_parser = crate::config::values::parser::<$ty>(),
                    hide_env_values = true
                )]
                pub $field: Option<$ty>,
            )+
        }

        impl std::fmt::Debug for $group {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($group))
                    $(.field(
                        stringify!($field),
                        &crate::config::group::shown!(self.$field $(, $shown)?),
                    ))+
                    .finish()
            }
        }

        impl $group {
            /// The file keys of this group's settings, in `--help` order.
            pub const KEYS: &'static [&'static str] = &[$(stringify!($field)),+];

            /// These settings, those missing taken from `lower`.
            pub fn or(self, lower: Self) -> Self {
                Self {
                    $($field: self.$field.or(lower.$field),)+
                }
            }

            /// The keys of the settings given.
            pub fn given(&self) -> impl Iterator<Item = &'static str> + use<> {
                [$(self.$field.is_some().then_some(stringify!($field))),+]
                    .into_iter()
                    .flatten()
            }

            /// Forgets the settings whose key `keep` refuses.
            pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
                $(
                    if !keep(stringify!($field)) {
                        self.$field = None;
                    }
                )+
            }

            /// Sets `key` from its text: None when the key is not of this
            /// group, else whether the text is a value.
            pub fn set(&mut self, key: &str, text: &std::ffi::OsStr) -> Option<Result<(), String>> {
                match key {
                    $(
                        stringify!($field) => Some(
                            <$ty as crate::config::values::SettingValue>::parse(text)
                                .map(|value| self.$field = Some(value)),
                        ),
                    )+
                    _ => None,
                }
            }
        }
    };
}

/// How a setting's `Debug` shows its value: as it is, a secret as
/// [`Redacted`], a URL as [`RedactedUrl`].
macro_rules! shown {
    ($value:expr) => {
        $value
    };
    ($value:expr, secret) => {
        $value.as_ref().map(|_| crate::config::group::Redacted)
    };
    ($value:expr, url) => {
        $value.as_deref().map(crate::config::group::RedactedUrl)
    };
}

pub(crate) use {settings_group, shown};

/// A secret setting in `Debug`: `<redacted>`.
pub(crate) struct Redacted;

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A URL setting in `Debug`: without user name, password or query.
pub(crate) struct RedactedUrl<'a>(pub(crate) &'a str);

impl std::fmt::Debug for RedactedUrl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&stockade_core::redact::redact_url(self.0), f)
    }
}
