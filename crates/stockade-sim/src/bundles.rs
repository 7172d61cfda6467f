//! Big bundles in a rush: a sale of many SKUs with a per-SKU limit, whose
//! crowd opens with a rush of buyers each asking for one of every SKU at
//! the same instant, as a drop's launch does. The purchases that queue
//! while an instance's engine is deciding the first reach it as one batch
//! (up to 256 on Redis): purchase.lua then reads and writes a holding per
//! buyer and SKU, 21 fields for each accepted bundle of 20, so its
//! argument lists run past Lua 5.1's unpack limit (about 8,000 values)
//! from 191 accepted bundles on. No seed reached that before: sales had
//! at most 3 SKUs and buyers arrived one by one (issue 35, item 7).

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::scenario::{Buyer, Sale, Sku};

/// SKUs of a sale of big bundles; a bundle is one of each.
pub const SKUS: usize = 20;

/// Buyers in the rush (the first ones of the crowd, so a smaller crowd
/// keeps them): enough for each of 3 instances to batch more than 191.
pub const RUSH: usize = 750;

// A third of the rush is more than 191 buyers, and a batch of 192 accepted
// bundles names a holding per buyer and SKU (21 a bundle) and writes each
// as a field and a value: past 8,000 values.
const _: () = assert!(RUSH / 3 > 191 && 2 * 192 * (SKUS + 1) > 8_000);

/// Makes about a sixth of `sale`s big bundles: 20 SKUs of 200 to 400
/// items, a per-SKU limit of 1 or 2, a per-user limit (the tier's too)
/// that a bundle fits. The instant of the rush (ms after the run starts),
/// after the sale's start, if it did.
pub(crate) fn make_bundles(sale: &mut Sale, rng: &mut ChaCha8Rng) -> Option<u64> {
    if !rng.random_bool(1.0 / 6.0) {
        return None;
    }
    sale.skus = (0..SKUS)
        .map(|i| Sku {
            id: format!("s{i}"),
            stock: rng.random_range(200..=400),
        })
        .collect();
    sale.per_user_limit = SKUS as u32;
    sale.per_sku_limit = Some(rng.random_range(1..=2));
    for tier in &mut sale.tiers {
        tier.reserved = tier.reserved.min(sale.skus[0].stock);
        tier.per_user_limit = SKUS as u32;
    }
    // Past every instance's start by its clock (offsets up to 500 ms).
    Some(sale.starts_ms + rng.random_range(1_000..=5_000))
}

/// The first [`RUSH`] buyers arrive at `at_ms` and ask for one of each SKU.
pub(crate) fn rush(buyers: &mut [Buyer], at_ms: u64) {
    for buyer in buyers.iter_mut().take(RUSH) {
        buyer.arrives_ms = at_ms;
        buyer.items = (0..SKUS).map(|i| (i, 1)).collect();
    }
}
