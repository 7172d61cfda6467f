//! A draw sale's settings and its entries: when entries open and close,
//! an entry's id, and where it stands.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ValidationError;

/// When a draw sale takes entries: from `open_at` (inclusive) to
/// `close_at` (exclusive); the draw is made at `close_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrawConfig {
    /// When entries open.
    pub open_at: DateTime<Utc>,
    /// When entries close and the draw is made.
    pub close_at: DateTime<Utc>,
}

impl DrawConfig {
    /// Checks that entries close after they open (both kept to the
    /// millisecond, as the store keeps them).
    pub fn new(open_at: DateTime<Utc>, close_at: DateTime<Utc>) -> Result<Self, ValidationError> {
        let millis = |at: DateTime<Utc>| DateTime::from_timestamp_millis(at.timestamp_millis());
        let (Some(open_at), Some(close_at)) = (millis(open_at), millis(close_at)) else {
            return Err(ValidationError::new("entries_open_at", "is out of range"));
        };
        if close_at <= open_at {
            return Err(ValidationError::new(
                "entries_close_at",
                format!("must be after entries_open_at ({open_at})"),
            ));
        }
        Ok(Self { open_at, close_at })
    }

    /// Whether entries are taken at `now`.
    pub fn is_open_at(&self, now: DateTime<Utc>) -> bool {
        self.open_at <= now && now < self.close_at
    }
}

/// An entry's id: 32 hexadecimal digits, random, so that the published
/// list of entries says nothing about who entered.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EntryId(String);

impl EntryId {
    /// A new random id (128 bits).
    pub fn random() -> Self {
        Self(hex::encode(crate::entropy::random::<[u8; 16]>()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for EntryId {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.len() == 32
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(s.to_owned()))
        } else {
            Err(ValidationError::new(
                "entry_id",
                "is 32 lowercase hexadecimal digits",
            ))
        }
    }
}

impl TryFrom<String> for EntryId {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl From<EntryId> for String {
    fn from(value: EntryId) -> Self {
        value.0
    }
}

impl fmt::Display for EntryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where an entry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryResult {
    /// Entered; the draw has not been made.
    Entered,
    /// Drawn with stock for it: the entry has an order.
    Won,
    /// Drawn after the stock ran out: an unpaid hold may roll down to it.
    Waitlisted,
    /// No order for it, for good: its hold lapsed, or the draw settled
    /// before the stock came to it.
    Lost,
}

impl EntryResult {
    /// The name used in storage and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Entered => "entered",
            Self::Won => "won",
            Self::Waitlisted => "waitlisted",
            Self::Lost => "lost",
        }
    }
}

impl FromStr for EntryResult {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "entered" => Ok(Self::Entered),
            "won" => Ok(Self::Won),
            "waitlisted" => Ok(Self::Waitlisted),
            "lost" => Ok(Self::Lost),
            other => Err(ValidationError::new(
                "result",
                format!("unknown entry result {other:?}"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_ids_are_random_hex_and_round_trip() {
        let id = EntryId::random();
        assert_eq!(id.as_str().len(), 32);
        assert_eq!(id.as_str().parse::<EntryId>().unwrap(), id);
        assert_ne!(EntryId::random(), id);
        assert!("ABC".parse::<EntryId>().is_err());
        assert!("g".repeat(32).parse::<EntryId>().is_err());
    }

    #[test]
    fn entries_close_after_they_open() {
        let at = |s| DateTime::from_timestamp(s, 0).unwrap();
        assert!(DrawConfig::new(at(10), at(10)).is_err());
        let config = DrawConfig::new(at(10), at(20)).unwrap();
        assert!(!config.is_open_at(at(9)));
        assert!(config.is_open_at(at(10)));
        assert!(!config.is_open_at(at(20)));
        for result in [
            EntryResult::Entered,
            EntryResult::Won,
            EntryResult::Waitlisted,
            EntryResult::Lost,
        ] {
            assert_eq!(result.as_str().parse::<EntryResult>().unwrap(), result);
        }
    }
}
