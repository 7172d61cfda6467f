//! Buyer tiers: part of a sale's stock reserved for a group of buyers
//! (members, verified fans), with their own per-user limit and an earlier
//! start. A buyer's tier comes from their verified identity (or from a
//! trusted caller); a tier the sale does not name makes no difference.
//!
//! Reserves are accounting, not separate counters: a tier buyer's items
//! count against the tier's reserve first and then against the common
//! stock, so what is left of the common stock of a SKU is its stock, less
//! every reserve, less what its sales took from the common stock (see
//! [`crate::rule::available`]). Once the sale's `release_reserved_at` has
//! passed, the reserves are gone and every buyer takes from the whole stock.

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ValidationError;
use crate::sku::Item;

/// The most tiers one sale may have.
pub const MAX_TIERS: usize = 10;
/// The longest tier name, in characters.
pub const MAX_TIER_LEN: usize = 32;

/// A tier's name: 1 to 32 characters from `A-Za-z0-9_-`, like a SKU id,
/// so it is safe in Redis field names and stored lists.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TierName(String);

impl TierName {
    /// Validates and wraps a tier name.
    pub fn new(name: impl Into<String>) -> Result<Self, ValidationError> {
        let name = name.into();
        crate::validation::check_token("tier", &name, MAX_TIER_LEN)?;
        Ok(Self(name))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TierName {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<TierName> for String {
    fn from(value: TierName) -> Self {
        value.0
    }
}

impl fmt::Display for TierName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One tier of a sale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TierSpec {
    /// The tier's name, unique within the sale.
    pub name: TierName,
    /// Items of each SKU held back for the tier's buyers (SKUs not listed
    /// reserve nothing).
    pub reserved: Vec<Item>,
    /// The tier's per-user limit (None: the sale's).
    pub per_user_limit: Option<u32>,
    /// When the tier's buyers may start (None: with the sale).
    pub starts_at: Option<DateTime<Utc>>,
}

impl TierSpec {
    /// Items of `sku` the tier reserves.
    pub fn reserved_of(&self, sku: &crate::SkuId) -> u32 {
        self.reserved
            .iter()
            .find(|item| item.sku == *sku)
            .map_or(0, |item| item.quantity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_names_use_the_sku_alphabet() {
        assert!(TierName::new("members").is_ok());
        assert_eq!(TierName::new("").unwrap_err().field, "tier");
        assert!(TierName::new("gold members").is_err());
        assert!(TierName::new("x".repeat(33)).is_err());
    }
}
