//! A purchase request: who buys how many of which sale, with an optional
//! idempotency key that makes retries safe.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::sku::{WantedItem, check_wanted};
use crate::{Epoch, SaleId, SkuId, TierName, UserId, ValidationError};

/// The longest idempotency key, in bytes.
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 128;

macro_rules! text_id {
    ($(#[$doc:meta])* $name:ident, $field:literal, $max:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps the value.
            pub fn new(value: impl Into<String>) -> Result<Self, ValidationError> {
                let value = value.into();
                crate::validation::check_identifier($field, &value, $max)?;
                Ok(Self(value))
            }

            /// The value as a string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = ValidationError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::new(value)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

text_id!(
    /// A client-chosen key that makes a purchase safe to retry: 1 to 128
    /// bytes. Scoped to one buyer of one sale: the same key from the same
    /// buyer on the same sale always names the same order, and one buyer's
    /// key never refuses another buyer's purchase.
    IdempotencyKey,
    "idempotency_key",
    MAX_IDEMPOTENCY_KEY_BYTES
);

/// A request for items of one sale by one buyer: one item, or a bundle of
/// several SKUs taken all or nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purchase {
    sale_id: SaleId,
    user_id: UserId,
    quantity: u32,
    items: Vec<WantedItem>,
    tier: Option<TierName>,
    idempotency_key: Option<IdempotencyKey>,
    epoch: Epoch,
}

impl Purchase {
    /// Validates a purchase of `quantity` (1 to 1,000,000,000) items of the
    /// sale's only SKU.
    pub fn new(
        sale_id: impl Into<String>,
        user_id: impl Into<String>,
        quantity: u32,
    ) -> Result<Self, ValidationError> {
        Self::from_parts(SaleId::new(sale_id)?, UserId::new(user_id)?, quantity)
    }

    /// Builds a purchase from already validated ids.
    pub fn from_parts(
        sale_id: SaleId,
        user_id: UserId,
        quantity: u32,
    ) -> Result<Self, ValidationError> {
        Self::of_items(
            sale_id,
            user_id,
            vec![WantedItem {
                sku: None,
                quantity,
            }],
        )
    }

    /// Validates a purchase of `items`, all or nothing (see
    /// [`crate::sku::check_wanted`]).
    pub fn of_items(
        sale_id: SaleId,
        user_id: UserId,
        items: Vec<WantedItem>,
    ) -> Result<Self, ValidationError> {
        let quantity = check_wanted(&items)?;
        Ok(Self {
            sale_id,
            user_id,
            quantity,
            items,
            tier: None,
            idempotency_key: None,
            epoch: Epoch::FIRST,
        })
    }

    /// A purchase of `quantity` items of one named SKU.
    pub fn of_sku(
        sale_id: impl Into<String>,
        user_id: impl Into<String>,
        sku: impl Into<String>,
        quantity: u32,
    ) -> Result<Self, ValidationError> {
        Self::of_items(
            SaleId::new(sale_id)?,
            UserId::new(user_id)?,
            vec![WantedItem {
                sku: Some(SkuId::new(sku)?),
                quantity,
            }],
        )
    }

    /// Validates and attaches an idempotency key.
    pub fn with_idempotency_key(self, key: impl Into<String>) -> Result<Self, ValidationError> {
        Ok(self.with_key(IdempotencyKey::new(key)?))
    }

    /// The buyer's tier, from their verified identity or a trusted caller
    /// (a tier the sale does not name makes no difference).
    pub fn with_tier(mut self, tier: TierName) -> Self {
        self.tier = Some(tier);
        self
    }

    /// The buyer's tier, if any.
    pub fn tier(&self) -> Option<&TierName> {
        self.tier.as_ref()
    }

    /// Attaches an already validated idempotency key.
    pub fn with_key(mut self, key: IdempotencyKey) -> Self {
        self.idempotency_key = Some(key);
        self
    }

    /// Decides the purchase under `epoch`, the sale's epoch the caller read
    /// from the store (default [`Epoch::FIRST`]). An engine holding the
    /// sale under another epoch refuses it with
    /// [`crate::PurchaseOutcome::WrongEpoch`].
    pub fn at_epoch(mut self, epoch: Epoch) -> Self {
        self.epoch = epoch;
        self
    }

    /// The epoch the purchase is decided under.
    pub fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The sale bought from.
    pub fn sale_id(&self) -> &SaleId {
        &self.sale_id
    }
    /// The buyer.
    pub fn user_id(&self) -> &UserId {
        &self.user_id
    }
    /// How many items, across every SKU.
    pub fn quantity(&self) -> u32 {
        self.quantity
    }
    /// The items asked for, in the order asked.
    pub fn items(&self) -> &[WantedItem] {
        &self.items
    }
    /// The idempotency key, if the client sent one.
    pub fn idempotency_key(&self) -> Option<&IdempotencyKey> {
        self.idempotency_key.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantity_must_be_positive_and_bounded() {
        assert_eq!(Purchase::new("s", "u", 0).unwrap_err().field, "quantity");
        assert!(Purchase::new("s", "u", 1).is_ok());
        assert!(Purchase::new("s", "u", crate::sale::MAX_TOTAL_STOCK + 1).is_err());
    }

    #[test]
    fn idempotency_keys_are_bounded() {
        let p = Purchase::new("s", "u", 1).unwrap();
        assert!(p.clone().with_idempotency_key("k".repeat(128)).is_ok());
        assert_eq!(
            p.clone()
                .with_idempotency_key("k".repeat(129))
                .unwrap_err()
                .field,
            "idempotency_key"
        );
        assert!(p.with_idempotency_key("").is_err());
    }

    #[test]
    fn bad_sale_id_is_rejected_before_anything_else() {
        assert_eq!(Purchase::new("bad id", "u", 1).unwrap_err().field, "id");
    }
}
