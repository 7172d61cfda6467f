//! A sale split over several SKUs (`--skus N`): the stock shared out as
//! evenly as it goes over SKUs `size-1` … `size-N`, and each buyer always
//! asking for the same one (by a hash of their name), so every SKU gets
//! its share of the crowd and sells out on its own.

use stockade_core::{SkuId, SkuSpec};

/// The SKUs of a sale of `stock` items over `skus` SKUs (the first
/// `stock % skus` get one more); one SKU named `default` for `skus` = 1,
/// the sale `--stock` alone makes.
pub fn specs(stock: u32, skus: u32) -> Vec<SkuSpec> {
    if skus <= 1 {
        return vec![SkuSpec {
            id: SkuId::default_sku(),
            stock,
        }];
    }
    (0..skus)
        .map(|i| SkuSpec {
            id: SkuId::new(name(i)).expect("size-N is a SKU id"),
            stock: stock / skus + u32::from(i < stock % skus),
        })
        .collect()
}

/// The SKU `buyer` asks for, or None for a sale of one SKU (the purchase
/// names none, as on any one-SKU sale).
pub fn of_buyer(buyer: &str, skus: u32) -> Option<String> {
    if skus <= 1 {
        return None;
    }
    // FNV-1a: stable across runs and processes, unlike the std hasher.
    let hash = buyer.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    Some(name((hash % u64::from(skus)) as u32))
}

fn name(i: u32) -> String {
    format!("size-{}", i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stock_is_shared_out_and_every_sku_gets_buyers() {
        let specs = specs(10, 3);
        let stocks: Vec<u32> = specs.iter().map(|s| s.stock).collect();
        assert_eq!(stocks, [4, 3, 3]);
        assert_eq!(specs[2].id.as_str(), "size-3");
        assert_eq!(super::specs(7, 1)[0].id.as_str(), "default");
        let mut asked = [0; 3];
        for b in 0..3_000 {
            let sku = of_buyer(&format!("buyer-{b}"), 3).unwrap();
            asked[sku.trim_start_matches("size-").parse::<usize>().unwrap() - 1] += 1;
        }
        assert!(asked.iter().all(|n| (800..1_200).contains(n)), "{asked:?}");
        assert_eq!(of_buyer("x", 1), None);
        assert_eq!(of_buyer("buyer-7", 5), of_buyer("buyer-7", 5));
    }
}
