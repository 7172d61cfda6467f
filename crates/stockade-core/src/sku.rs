//! SKUs: the separately stocked variants of one sale (the sizes of a
//! sneaker, the parts of a bundle), and the items a purchase or an order
//! names.
//!
//! A sale created with `stock` alone has one SKU named [`DEFAULT_SKU`]. A
//! purchase of a one-SKU sale may leave its SKU unnamed; a purchase of a
//! sale with several must name each.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ValidationError;
use crate::sale::MAX_TOTAL_STOCK;

/// The SKU of a sale created with `stock` alone.
pub const DEFAULT_SKU: &str = "default";
/// The most SKUs one sale may have.
pub const MAX_SKUS: usize = 100;
/// The most items one purchase may name.
pub const MAX_ITEMS: usize = 20;
/// The longest SKU id, in characters.
pub const MAX_SKU_ID_LEN: usize = 64;

/// A SKU id: 1 to 64 characters from `A-Za-z0-9_-`, like a sale id, so it
/// is safe inside Redis field names and the stored item lists
/// (`sku=quantity,...`) without escaping. Shared, not copied: every order
/// of a sale names its SKUs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SkuId(Arc<str>);

impl SkuId {
    /// Validates and wraps a SKU id.
    pub fn new(id: impl Into<String>) -> Result<Self, ValidationError> {
        let id = id.into();
        crate::validation::check_token("sku", &id, MAX_SKU_ID_LEN)?;
        Ok(Self(id.into()))
    }

    /// The SKU of a sale created with `stock` alone.
    pub fn default_sku() -> Self {
        Self(DEFAULT_SKU.into())
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for SkuId {
    type Error = ValidationError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<SkuId> for String {
    fn from(value: SkuId) -> Self {
        value.0.to_string()
    }
}

impl fmt::Display for SkuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One SKU of a sale and its stock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkuSpec {
    /// The SKU id, unique within the sale.
    pub id: SkuId,
    /// Its stock (at least 1).
    pub stock: u32,
}

impl SkuSpec {
    /// SKUs as every engine and the store keep them: `id=stock` joined by
    /// commas, in the spec's order (the encoding of [`Item::encode_list`]).
    pub fn encode_list(skus: &[SkuSpec]) -> String {
        let items: Vec<Item> = skus
            .iter()
            .map(|sku| Item {
                sku: sku.id.clone(),
                quantity: sku.stock,
            })
            .collect();
        Item::encode_list(&items)
    }

    /// Reads what [`SkuSpec::encode_list`] wrote.
    pub fn decode_list(text: &str) -> Result<Vec<SkuSpec>, ValidationError> {
        Ok(Item::decode_list(text)?
            .into_iter()
            .map(|item| SkuSpec {
                id: item.sku,
                stock: item.quantity,
            })
            .collect())
    }
}

/// An item of an order: a quantity of one SKU.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Item {
    /// The SKU.
    pub sku: SkuId,
    /// How many (at least 1).
    pub quantity: u32,
}

impl Item {
    /// Items as stored by every engine and the store: `sku=quantity`
    /// joined by commas, in the order of the purchase.
    pub fn encode_list(items: &[Item]) -> String {
        let mut text = String::with_capacity(items.len() * 16);
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                text.push(',');
            }
            text.push_str(item.sku.as_str());
            text.push('=');
            text.push_str(&item.quantity.to_string());
        }
        text
    }

    /// Reads what [`Item::encode_list`] wrote.
    pub fn decode_list(text: &str) -> Result<Vec<Item>, ValidationError> {
        let bad = || ValidationError::new("items", format!("malformed item list {text:?}"));
        text.split(',')
            .map(|part| {
                let (sku, quantity) = part.split_once('=').ok_or_else(bad)?;
                let quantity: u32 = quantity.parse().map_err(|_| bad())?;
                if quantity == 0 {
                    return Err(bad());
                }
                Ok(Item {
                    sku: SkuId::new(sku)?,
                    quantity,
                })
            })
            .collect()
    }
}

/// An item a purchase asks for: a quantity of a named SKU, or of the sale's
/// only SKU when `sku` is None.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WantedItem {
    /// The SKU, or None for the only SKU of a one-SKU sale.
    pub sku: Option<SkuId>,
    /// How many (1 to 1,000,000,000).
    pub quantity: u32,
}

/// Checks the items of one purchase: 1 to [`MAX_ITEMS`], each quantity at
/// least 1, no SKU named twice, an unnamed SKU only as the sole item, and
/// at most [`MAX_TOTAL_STOCK`] items in all. Returns the total quantity.
pub fn check_wanted(items: &[WantedItem]) -> Result<u32, ValidationError> {
    if items.is_empty() || items.len() > MAX_ITEMS {
        return Err(ValidationError::new(
            "items",
            format!("must name 1 to {MAX_ITEMS} items (got {})", items.len()),
        ));
    }
    let mut total: u64 = 0;
    for (i, item) in items.iter().enumerate() {
        if item.quantity == 0 || item.quantity > MAX_TOTAL_STOCK {
            return Err(ValidationError::new(
                "quantity",
                format!(
                    "must be between 1 and {MAX_TOTAL_STOCK} (got {})",
                    item.quantity
                ),
            ));
        }
        total += u64::from(item.quantity);
        match &item.sku {
            None if items.len() > 1 => {
                return Err(ValidationError::new(
                    "items",
                    "every item of a purchase of several items must name its sku",
                ));
            }
            Some(sku)
                if items[..i]
                    .iter()
                    .any(|other| other.sku.as_ref() == Some(sku)) =>
            {
                return Err(ValidationError::new(
                    "items",
                    format!("sku {sku} is named twice; give it once with the whole quantity"),
                ));
            }
            None | Some(_) => {}
        }
    }
    if total > u64::from(MAX_TOTAL_STOCK) {
        return Err(ValidationError::new(
            "quantity",
            format!("the items add up to {total}, more than {MAX_TOTAL_STOCK}"),
        ));
    }
    Ok(total as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted(sku: Option<&str>, quantity: u32) -> WantedItem {
        WantedItem {
            sku: sku.map(|s| SkuId::new(s).unwrap()),
            quantity,
        }
    }

    #[test]
    fn sku_ids_use_the_sale_id_alphabet() {
        assert!(SkuId::new("us-9_W").is_ok());
        assert_eq!(SkuId::new("").unwrap_err().field, "sku");
        assert!(SkuId::new("a=b").is_err());
        assert!(SkuId::new("a,b").is_err());
        assert!(SkuId::new("x".repeat(65)).is_err());
    }

    #[test]
    fn item_lists_round_trip() {
        let items = vec![
            Item {
                sku: SkuId::new("us-9").unwrap(),
                quantity: 2,
            },
            Item {
                sku: SkuId::new("ctrl").unwrap(),
                quantity: 1,
            },
        ];
        let text = Item::encode_list(&items);
        assert_eq!(text, "us-9=2,ctrl=1");
        assert_eq!(Item::decode_list(&text).unwrap(), items);
        assert!(Item::decode_list("").is_err());
        assert!(Item::decode_list("a=0").is_err());
        assert!(Item::decode_list("a=x").is_err());
        assert!(Item::decode_list("a").is_err());
    }

    #[test]
    fn wanted_items_are_checked() {
        assert_eq!(check_wanted(&[wanted(None, 3)]), Ok(3));
        assert_eq!(
            check_wanted(&[wanted(Some("a"), 1), wanted(Some("b"), 2)]),
            Ok(3)
        );
        assert_eq!(check_wanted(&[]).unwrap_err().field, "items");
        assert_eq!(
            check_wanted(&[wanted(None, 0)]).unwrap_err().field,
            "quantity"
        );
        let twice = check_wanted(&[wanted(Some("a"), 1), wanted(Some("a"), 1)]).unwrap_err();
        assert!(twice.reason.contains("named twice"), "{twice}");
        assert!(check_wanted(&[wanted(None, 1), wanted(Some("a"), 1)]).is_err());
        let many: Vec<WantedItem> = (0..=MAX_ITEMS)
            .map(|i| wanted(Some(&format!("s{i}")), 1))
            .collect();
        assert!(check_wanted(&many).is_err());
        let big =
            check_wanted(&[wanted(Some("a"), MAX_TOTAL_STOCK), wanted(Some("b"), 1)]).unwrap_err();
        assert_eq!(big.field, "quantity");
    }
}
