//! A buyer's id in its one canonical form, so one person is one buyer for
//! limits, entries, queue tickets and the orders they may read.
//!
//! The canonical form is the id in Unicode Normalization Form C (NFC), 1
//! to [`MAX_USER_ID_BYTES`] bytes of it, with no whitespace at either end
//! and none of the characters [`check_identifier`] refuses. Canonically
//! equivalent spellings (`é` as one code point or as `e` + a combining
//! accent) are normalised silently: they are the same text and no client
//! can tell them apart on screen. Surrounding whitespace is refused, not
//! trimmed: it is almost always a bug in the caller, and trimming would
//! quietly merge ids an identity provider keeps apart. Case is kept:
//! identity providers treat `sub` as case-sensitive, so folding would
//! merge two accounts. NFKC is not used for the same reason (it maps `ﬁ`
//! to `fi` and full-width letters to ASCII: different ids to some issuers).

use std::fmt;

use serde::{Deserialize, Serialize};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

use crate::ValidationError;
use crate::validation::check_identifier;

/// The longest user id, in bytes of its canonical form.
pub const MAX_USER_ID_BYTES: usize = 128;

/// A buyer, in canonical form (see the [module](self) docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UserId(String);

impl UserId {
    /// The canonical form of an id a client or an identity provider sent:
    /// NFC, then checked. Every id that enters the service comes through
    /// here.
    pub fn new(value: impl Into<String>) -> Result<Self, ValidationError> {
        let value = value.into();
        let value = match is_nfc_quick(value.chars()) {
            IsNormalized::Yes => value,
            IsNormalized::No | IsNormalized::Maybe => value.nfc().collect(),
        };
        check_identifier("user_id", &value, MAX_USER_ID_BYTES)?;
        if value.starts_with(char::is_whitespace) || value.ends_with(char::is_whitespace) {
            return Err(ValidationError::new(
                "user_id",
                "must not start or end with whitespace: send the id without it",
            ));
        }
        Ok(Self(value))
    }

    /// An id read back from the store, an engine or a queue backend, kept
    /// byte for byte: one written by this version is canonical already,
    /// and one written before the canonical form (possibly with
    /// surrounding whitespace, or not in NFC) must still be read, as the
    /// buyer it was.
    pub fn stored(value: impl Into<String>) -> Result<Self, ValidationError> {
        let value = value.into();
        check_identifier("user_id", &value, MAX_USER_ID_BYTES)?;
        Ok(Self(value))
    }

    /// The value as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Serde reads the service's own records (the journal, engine replies):
/// kept as stored.
impl TryFrom<String> for UserId {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::stored(value)
    }
}

impl From<UserId> for String {
    fn from(value: UserId) -> Self {
        value.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_ids_are_1_to_128_bytes_without_control_characters() {
        assert!(UserId::new("u").is_ok());
        assert!(UserId::new("ü".repeat(64)).is_ok()); // 128 bytes
        assert_eq!(UserId::new("ü".repeat(65)).unwrap_err().field, "user_id");
        assert!(UserId::new("").is_err());
        assert!(UserId::new("a\0b").is_err());
        assert!(UserId::new("a\nb").is_err());
    }

    #[test]
    fn a_user_id_is_its_nfc_form_without_surrounding_whitespace_and_keeps_its_case() {
        let composed = UserId::new("Jos\u{e9}").unwrap();
        assert_eq!(UserId::new("Jose\u{301}").unwrap(), composed);
        assert_eq!(UserId::new("Jose\u{301}").unwrap().as_str(), "Jos\u{e9}");
        // NFC, not NFKC: the ligature and the full-width letter stay.
        assert_ne!(
            UserId::new("\u{fb01}x").unwrap(),
            UserId::new("fix").unwrap()
        );
        assert_ne!(UserId::new("Ann").unwrap(), UserId::new("ann").unwrap());
        for padded in [" ann", "ann ", "\u{2003}ann", "ann\u{3000}", "\u{a0}ann"] {
            let error = UserId::new(padded).unwrap_err();
            assert_eq!(error.field, "user_id", "{padded:?}");
            assert!(error.reason.contains("whitespace"), "{padded:?}: {error}");
        }
        assert!(UserId::new("Ann Lee").is_ok());
        // The limit is on the canonical form's bytes.
        assert!(UserId::new("e\u{301}".repeat(60)).is_ok()); // 180 bytes sent, 120 as NFC
    }

    #[test]
    fn a_stored_id_is_read_as_it_was_written() {
        let old = UserId::stored(" padded ").unwrap();
        assert_eq!(old.as_str(), " padded ");
        let nfd = UserId::stored("Jose\u{301}").unwrap();
        assert_eq!(nfd.as_str(), "Jose\u{301}");
        let json: UserId = serde_json::from_str("\" padded \"").unwrap();
        assert_eq!(json, old);
        assert!(UserId::stored("a\0b").is_err());
    }
}
