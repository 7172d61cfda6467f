//! What an engine knows about a sale at one instant, in all and per SKU.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{SaleSpec, SaleStatus, Window};
use crate::sku::SkuId;

/// What an engine knows about a sale at one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SaleSnapshot {
    /// The sale's specification.
    pub spec: SaleSpec,
    /// Items still available, across every SKU.
    pub remaining: u32,
    /// Items held by live (not cancelled) orders: always `total - remaining`.
    pub sold: u32,
    /// Status at the instant of the snapshot: sold out when every SKU is.
    pub status: SaleStatus,
    /// Each SKU's stock, in the spec's order.
    pub skus: Vec<SkuSnapshot>,
}

/// One SKU of a [`SaleSnapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkuSnapshot {
    /// The SKU id.
    pub id: SkuId,
    /// Its stock.
    pub stock: u32,
    /// Its items still available.
    pub remaining: u32,
    /// Its items held by live orders.
    pub sold: u32,
    /// The sale's status, sold out when this SKU is.
    pub status: SaleStatus,
}

impl SaleSnapshot {
    /// Builds a snapshot from the spec, each SKU's remaining stock (in the
    /// spec's order; a missing figure counts as none left) and the instant.
    pub fn at(spec: SaleSpec, remaining: &[u32], now: DateTime<Utc>) -> Self {
        let status_of = |left: u32| match spec.window_at(now) {
            Window::NotStarted => SaleStatus::Upcoming,
            Window::Ended => SaleStatus::Ended,
            Window::Open if left == 0 => SaleStatus::SoldOut,
            Window::Open => SaleStatus::Open,
        };
        let skus: Vec<SkuSnapshot> = spec
            .skus()
            .iter()
            .enumerate()
            .map(|(i, sku)| {
                let left = remaining.get(i).copied().unwrap_or(0).min(sku.stock);
                SkuSnapshot {
                    id: sku.id.clone(),
                    stock: sku.stock,
                    remaining: left,
                    sold: sku.stock - left,
                    status: status_of(left),
                }
            })
            .collect();
        let total_left: u32 = skus.iter().map(|s| s.remaining).sum();
        Self {
            status: status_of(total_left),
            sold: spec.total_stock().saturating_sub(total_left),
            remaining: total_left,
            skus,
            spec,
        }
    }
}
