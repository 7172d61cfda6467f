//! What a sale has sold: items of each SKU held by live orders, and of
//! those, by buyers of each tier. The one count the memory engine, the
//! store and a rebuild keep, and the one the rule reads ([`Sold`]).

use crate::rule::Sold;
use crate::sale::SaleSpec;

/// Sold counts by SKU (in the spec's order) and by tier and SKU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SoldCounts {
    /// Items of each SKU held by live orders.
    pub sold: Vec<u32>,
    /// For each tier of the spec, items of each SKU its buyers hold.
    pub tier_sold: Vec<Vec<u32>>,
}

impl SoldCounts {
    /// Nothing sold of `spec`.
    pub fn new(spec: &SaleSpec) -> Self {
        let skus = spec.skus().len();
        Self {
            sold: vec![0; skus],
            tier_sold: vec![vec![0; skus]; spec.tiers().len()],
        }
    }

    /// What is left of each SKU.
    pub fn left(&self, spec: &SaleSpec) -> Vec<u32> {
        spec.skus()
            .iter()
            .zip(&self.sold)
            .map(|(sku, sold)| sku.stock.saturating_sub(*sold))
            .collect()
    }

    /// Counts an order's items (resolved against the spec) as sold to a
    /// buyer of `tier`.
    pub fn take(&mut self, tier: Option<usize>, items: &[(usize, u32)]) {
        for &(i, quantity) in items {
            self.sold[i] += quantity;
            if let Some(t) = tier {
                self.tier_sold[t][i] += quantity;
            }
        }
    }

    /// Counts an order's items as no longer sold; None (and nothing
    /// changed) if fewer were counted.
    pub fn give_back(&mut self, tier: Option<usize>, items: &[(usize, u32)]) -> Option<()> {
        let mut after = self.clone();
        for &(i, quantity) in items {
            after.sold[i] = after.sold[i].checked_sub(quantity)?;
            if let Some(t) = tier {
                after.tier_sold[t][i] = after.tier_sold[t][i].checked_sub(quantity)?;
            }
        }
        *self = after;
        Some(())
    }
}

impl Sold for SoldCounts {
    fn sold(&self, sku: usize) -> u32 {
        self.sold[sku]
    }

    fn tier_sold(&self, tier: usize, sku: usize) -> u32 {
        self.tier_sold[tier][sku]
    }
}
