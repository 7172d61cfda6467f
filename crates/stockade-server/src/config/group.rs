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
macro_rules! settings_group {
    (
        $(#[$meta:meta])*
        pub struct $group:ident {
            $(
                $(#[$field_meta:meta])*
                pub $field:ident: Option<$ty:ty>,
            )+
        }
    ) => {
        #[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args, serde::Deserialize)]
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

pub(crate) use settings_group;
