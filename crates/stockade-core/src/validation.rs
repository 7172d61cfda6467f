//! The error returned when a value does not satisfy its domain rules.

/// A value was rejected by a constructor: `field` says which, `reason` why.
///
/// The message is written for the person who sent the value, e.g.
/// `quantity: must be at least 1 (got 0)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct ValidationError {
    /// The name of the field, as the API spells it.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

impl ValidationError {
    /// Creates an error for `field`.
    pub fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }
}

/// Characters that change how text around them is displayed without being
/// visible themselves: bidirectional embeddings, overrides, isolates and
/// marks (which can make `admin` and `nimda` look alike in a log or a
/// support tool), and zero-width spaces, joiners and the byte-order mark
/// (which make two identical-looking ids different).
const INVISIBLE: &[char] = &[
    '\u{061C}', // arabic letter mark
    '\u{200B}', // zero width space
    '\u{200C}', // zero width non-joiner
    '\u{200D}', // zero width joiner
    '\u{200E}', // left-to-right mark
    '\u{200F}', // right-to-left mark
    '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', // embeddings, overrides
    '\u{2060}', // word joiner
    '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', // isolates
    '\u{FEFF}', // zero width no-break space (byte-order mark)
];

/// Checks a free-form identifier a client sends (a buyer id, an
/// idempotency key): `1..=max` bytes of UTF-8 that are not all whitespace,
/// with no control characters (a NUL cannot be stored in PostgreSQL text, a
/// newline only ever means a bug upstream) and no invisible characters that
/// reorder or hide text (bidirectional marks, embeddings, overrides and
/// isolates; zero-width spaces and joiners; the byte-order mark).
pub fn check_identifier(
    field: &'static str,
    value: &str,
    max: usize,
) -> Result<(), ValidationError> {
    if value.is_empty() || value.len() > max {
        return Err(ValidationError::new(
            field,
            format!("must be 1 to {max} bytes long (got {})", value.len()),
        ));
    }
    if value.trim().is_empty() {
        return Err(ValidationError::new(field, "must not be only whitespace"));
    }
    if value.chars().any(char::is_control) {
        return Err(ValidationError::new(
            field,
            "must not contain control characters",
        ));
    }
    if let Some(bad) = value.chars().find(|c| INVISIBLE.contains(c)) {
        return Err(ValidationError::new(
            field,
            format!(
                "must not contain invisible bidirectional or zero-width characters (found U+{:04X})",
                u32::from(bad)
            ),
        ));
    }
    Ok(())
}

/// Checks a name Stockade keys things by (a sale, a SKU, a tier): 1 to
/// `max` characters from `A-Za-z0-9_-`, so it is safe in Redis key and
/// field names (and their `{hash tag}`), URLs, stored lists and log lines
/// without escaping.
pub fn check_token(field: &'static str, value: &str, max: usize) -> Result<(), ValidationError> {
    if value.is_empty() || value.len() > max {
        return Err(ValidationError::new(
            field,
            format!("must be 1 to {max} characters long (got {})", value.len()),
        ));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(ValidationError::new(
            field,
            format!("may contain only A-Z, a-z, 0-9, '_' and '-' (found {bad:?} in {value:?})"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_refuse_blank_control_bidi_and_zero_width_text() {
        assert!(check_identifier("user_id", "user-42", 128).is_ok());
        assert!(check_identifier("user_id", "Zoë Ångström", 128).is_ok());
        assert!(check_identifier("user_id", " padded ", 128).is_ok());
        for bad in [
            "",
            " ",
            "\t \u{3000}",
            "a\0b",
            "a\nb",
            "user\u{202E}gnp.exe",
            "ad\u{200B}min",
            "\u{FEFF}user",
            "a\u{2067}b",
            "a\u{200D}b",
            "a\u{200F}",
        ] {
            let error = check_identifier("user_id", bad, 128).unwrap_err();
            assert_eq!(error.field, "user_id", "{bad:?}");
        }
        let error = check_identifier("user_id", "x\u{202E}y", 128).unwrap_err();
        assert!(error.reason.contains("U+202E"), "{error}");
        assert!(check_identifier("user_id", &"a".repeat(129), 128).is_err());
    }
}
