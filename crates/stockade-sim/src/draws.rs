//! Drawing a sale and its buyers from a seed's streams.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::scenario::{AfterOrder, Buyer, Engine, Fault, MAX_OFFSET_MS, Sale, Size, Sku, Tier};

pub(crate) fn draw_sale(rng: &mut ChaCha8Rng, size: Size) -> Sale {
    let skus: Vec<Sku> = (0..rng.random_range(1..=3))
        .map(|i| Sku {
            id: format!("s{i}"),
            stock: rng.random_range(1..=400),
        })
        .collect();
    let starts_ms = rng.random_range(0..=size.span_ms / 4);
    let tiers = if rng.random_bool(0.4) {
        vec![Tier {
            name: "members".into(),
            reserved: rng.random_range(1..=skus[0].stock),
            per_user_limit: rng.random_range(1..=4),
            early_ms: rng.random_range(0..=5_000),
        }]
    } else {
        Vec::new()
    };
    let ends_ms = rng
        .random_bool(0.3)
        .then(|| starts_ms + rng.random_range(size.span_ms / 4..=size.span_ms).max(2));
    // The reserves go to everyone before the sale ends.
    let release_reserved_ms = (!tiers.is_empty() && rng.random_bool(0.5)).then(|| {
        let last = ends_ms.map_or(size.span_ms / 2, |ends| ends - starts_ms - 1);
        starts_ms + rng.random_range(0..=last)
    });
    Sale {
        id: "drop".into(),
        per_user_limit: rng.random_range(1..=3),
        per_sku_limit: rng.random_bool(0.3).then(|| rng.random_range(1..=2)),
        hold_seconds: rng.random_bool(0.5).then(|| rng.random_range(1..=20)),
        starts_ms,
        ends_ms,
        release_reserved_ms,
        tiers,
        skus,
        draw_close_ms: None,
    }
}

/// Makes about a third of the sales plain, the commonest sale: one SKU
/// (half of them created with `stock` alone, so it is `default`), no
/// tiers, no per-SKU limit. Whether it did.
pub(crate) fn make_plain(sale: &mut Sale, rng: &mut ChaCha8Rng) -> bool {
    if !rng.random_bool(1.0 / 3.0) {
        return false;
    }
    sale.skus.truncate(1);
    if rng.random_bool(0.5) {
        sale.skus[0].id = stockade_core::sku::DEFAULT_SKU.into();
    }
    sale.tiers.clear();
    sale.release_reserved_ms = None;
    sale.per_sku_limit = None;
    true
}

/// Makes `sale` a draw: entries close within the crowd's span, the sale is
/// open then (it starts before and ends well after).
pub(crate) fn make_draw(sale: &mut Sale, rng: &mut ChaCha8Rng, size: Size) {
    let close = rng
        .random_range(size.span_ms / 4..=size.span_ms * 3 / 4)
        .max(1_000);
    sale.starts_ms = sale.starts_ms.min(close - 1);
    if let Some(ends) = &mut sale.ends_ms {
        *ends = (*ends).max(close + size.span_ms / 2);
    }
    if let Some(release) = &mut sale.release_reserved_ms {
        *release = (*release).max(sale.starts_ms);
    }
    sale.draw_close_ms = Some(close);
}

pub(crate) fn draw_buyer(rng: &mut ChaCha8Rng, index: usize, sale: &Sale, size: Size) -> Buyer {
    let sku = |rng: &mut ChaCha8Rng| rng.random_range(0..sale.skus.len());
    let items = if sale.skus.len() > 1 && rng.random_bool(0.2) {
        let first = sku(rng);
        let second = (first + 1) % sale.skus.len();
        vec![(first, 1), (second, rng.random_range(1..=2))]
    } else {
        vec![(sku(rng), rng.random_range(1..=2))]
    };
    let after = match rng.random_range(0..10) {
        0..=5 => AfterOrder::Pays(rng.random_range(0..30_000)),
        6 => AfterOrder::Cancels(rng.random_range(0..20_000)),
        _ => AfterOrder::Nothing,
    };
    Buyer {
        user: format!("u{index}"),
        arrives_ms: rng.random_range(0..size.span_ms.max(1)),
        tier: (!sale.tiers.is_empty() && rng.random_bool(0.3)).then(|| "members".into()),
        items,
        respond_async: rng.random_bool(0.3),
        keyed: rng.random_bool(0.7),
        retries: rng.random_range(0..=3),
        buys_again: rng.random_bool(0.15),
        after,
    }
}

/// The seed's faults (`size.faults` of them, by instant, not sorted) for
/// `instances` instances on `engine`.
pub(crate) fn draw_faults(
    rng: &mut ChaCha8Rng,
    engine: Engine,
    instances: usize,
    size: Size,
) -> Vec<(u64, Fault)> {
    (0..size.faults)
        .map(|_| {
            let at = rng.random_range(0..size.span_ms.max(1));
            let instance = rng.random_range(0..instances);
            let kinds = if engine == Engine::Redis { 8 } else { 4 };
            let fault = match rng.random_range(0..kinds) {
                3 => Fault::StoreOutage(rng.random_range(100..8_000)),
                4 => Fault::RedisLoss,
                5 => Fault::RedisFreeze(rng.random_range(100..5_000)),
                6 => Fault::RedisDropReplies(rng.random_range(1..4)),
                7 => Fault::RedisFailover(rng.random_range(0..20)),
                0 => Fault::Restart(instance, rng.random_range(0..3_000)),
                1 => Fault::Crash(instance, rng.random_range(0..3_000)),
                _ => {
                    let by = rng.random_range(-MAX_OFFSET_MS..=MAX_OFFSET_MS);
                    Fault::ClockJump(instance, by)
                }
            };
            (at, fault)
        })
        .collect()
}
