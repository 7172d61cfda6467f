//! A sale's waiting room settings: how fast buyers are admitted, how long
//! an admission lasts, and how far admissions may run ahead of the stock.
//! Fixed at the sale's creation, kept by the store with the sale, used by
//! the service's waiting rooms.

use std::time::Duration;

use crate::ValidationError;

/// A sale's waiting room settings, fixed at the sale's creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoomConfig {
    /// Buyers admitted per second at most.
    pub admit_per_second: u32,
    /// How long an admission (its token) is valid.
    pub admission_ttl: Duration,
    /// Outstanding admissions may reach remaining stock × this / 1000.
    pub admission_factor_milli: u32,
}

impl RoomConfig {
    /// The default admission factor, 1.5.
    pub const DEFAULT_FACTOR_MILLI: u32 = 1_500;
    /// The highest admission rate.
    pub const MAX_RATE: u32 = 100_000;
    /// The longest admission ttl.
    pub const MAX_TTL: Duration = Duration::from_secs(3_600);

    /// Validated settings.
    pub fn new(
        admit_per_second: u32,
        admission_ttl: Duration,
        admission_factor_milli: u32,
    ) -> Result<Self, ValidationError> {
        if !(1..=Self::MAX_RATE).contains(&admit_per_second) {
            return Err(ValidationError::new(
                "waiting_room.admit_per_second",
                format!(
                    "must be between 1 and {} (got {admit_per_second})",
                    Self::MAX_RATE
                ),
            ));
        }
        if admission_ttl < Duration::from_secs(1) || admission_ttl > Self::MAX_TTL {
            return Err(ValidationError::new(
                "waiting_room.admission_ttl_seconds",
                format!("must be between 1 and {} seconds", Self::MAX_TTL.as_secs()),
            ));
        }
        if !(1_000..=10_000).contains(&admission_factor_milli) {
            return Err(ValidationError::new(
                "waiting_room.admission_factor",
                "must be between 1.0 and 10.0 (below 1 the last items could never be offered)",
            ));
        }
        Ok(Self {
            admit_per_second,
            admission_ttl,
            admission_factor_milli,
        })
    }

    /// The most outstanding admissions allowed with `remaining` items left.
    pub fn cap(&self, remaining: u32) -> u64 {
        u64::from(remaining) * u64::from(self.admission_factor_milli) / 1_000
    }

    /// The most admissions the rate lets through at once after a pause:
    /// half a second's worth (at least one).
    pub fn burst(&self) -> f64 {
        (f64::from(self.admit_per_second) / 2.0).max(1.0)
    }

    /// The admission ttl in milliseconds.
    pub fn ttl_ms(&self) -> i64 {
        self.admission_ttl.as_millis() as i64
    }
}

/// Why a ticket or the whole queue is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// The sale sold out (the queue opens again if stock comes back, but
    /// the tickets it closed stay closed: their holders join again).
    SoldOut,
    /// The sale ended.
    Ended,
    /// The ticket's admission expired.
    AdmissionExpired,
}

impl CloseReason {
    /// The API's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SoldOut => "sold_out",
            Self::Ended => "ended",
            Self::AdmissionExpired => "admission_expired",
        }
    }

    /// Parses a stored reason.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "sold_out" => Some(Self::SoldOut),
            "ended" => Some(Self::Ended),
            "admission_expired" => Some(Self::AdmissionExpired),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_follows_the_stock_and_settings_are_bounded() {
        let room = RoomConfig::new(10, Duration::from_secs(60), 1_500).unwrap();
        assert_eq!(room.cap(100), 150);
        assert_eq!(room.cap(1), 1);
        assert_eq!(room.cap(0), 0);
        assert!(RoomConfig::new(0, Duration::from_secs(60), 1_500).is_err());
        assert!(RoomConfig::new(1, Duration::ZERO, 1_500).is_err());
        assert!(RoomConfig::new(1, Duration::from_secs(60), 999).is_err());
    }
}
