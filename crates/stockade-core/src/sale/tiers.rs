//! Checking a sale's tiers against its SKUs and window.

use super::{MAX_PER_USER_LIMIT, SaleSpec};
use crate::ValidationError;
use crate::tier::MAX_TIERS;

/// Checks the tiers against the sale: distinct names, reserves of the
/// sale's SKUs that fit their stock, limits in range, starts no later than
/// the sale's and before its end, and a release of the reserves only when
/// there are tiers, before the sale ends.
pub(super) fn check_tiers(spec: &SaleSpec) -> Result<(), ValidationError> {
    let bad = |reason: String| Err(ValidationError::new("tiers", reason));
    if spec.tiers.len() > MAX_TIERS {
        return bad(format!(
            "at most {MAX_TIERS} tiers (got {})",
            spec.tiers.len()
        ));
    }
    for (i, tier) in spec.tiers.iter().enumerate() {
        let name = &tier.name;
        if spec.tiers[..i].iter().any(|other| other.name == *name) {
            return bad(format!("tier {name} is listed twice"));
        }
        for (j, item) in tier.reserved.iter().enumerate() {
            if spec.sku_index(&item.sku).is_none() {
                return bad(format!(
                    "tier {name} reserves SKU {}, which the sale does not have",
                    item.sku
                ));
            }
            if item.quantity == 0 {
                return bad(format!("tier {name} reserves 0 of SKU {}", item.sku));
            }
            if tier.reserved[..j].iter().any(|other| other.sku == item.sku) {
                return bad(format!("tier {name} reserves SKU {} twice", item.sku));
            }
        }
        if let Some(limit) = tier.per_user_limit
            && !(1..=MAX_PER_USER_LIMIT).contains(&limit)
        {
            return bad(format!(
                "tier {name}: per_user_limit must be between 1 and {MAX_PER_USER_LIMIT} (got {limit})"
            ));
        }
        if let Some(start) = tier.starts_at {
            if spec.starts_at.is_some_and(|sale| start > sale) {
                return bad(format!(
                    "tier {name} starts after the sale: a tier may only start earlier"
                ));
            }
            if spec.ends_at.is_some_and(|end| start >= end) {
                return bad(format!("tier {name} starts after the sale ends"));
            }
        }
    }
    for (i, sku) in spec.skus.iter().enumerate() {
        let reserved: u64 = spec
            .tiers
            .iter()
            .map(|tier| u64::from(tier.reserved_of(&sku.id)))
            .sum();
        if reserved > u64::from(sku.stock) {
            return bad(format!(
                "the tiers reserve {reserved} of SKU {}, more than its stock of {}",
                sku.id, spec.skus[i].stock
            ));
        }
    }
    if let Some(at) = spec.release_reserved_at {
        if spec.tiers.iter().all(|tier| tier.reserved.is_empty()) {
            return Err(ValidationError::new(
                "release_reserved_at",
                "needs tiers that reserve stock",
            ));
        }
        if spec.ends_at.is_some_and(|end| at >= end) {
            return Err(ValidationError::new(
                "release_reserved_at",
                "must be before ends_at",
            ));
        }
    }
    Ok(())
}
