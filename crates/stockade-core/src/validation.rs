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
