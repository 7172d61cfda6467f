//! The rule's order of checks, bundles, limits and tiers.

use chrono::{Duration, TimeZone};

use super::*;
use crate::SkuSpec;

fn at(second: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_800_000_000 + second, 0).unwrap()
}

fn spec() -> SaleSpec {
    SaleSpec::builder("s", 10)
        .unwrap()
        .per_user_limit(3)
        .unwrap()
        .starts_at(at(0))
        .ends_at(at(0) + Duration::seconds(60))
        .build()
        .unwrap()
}

/// Sold counts that leave `remaining` of each SKU.
fn left(spec: &SaleSpec, remaining: &[u32]) -> crate::SoldCounts {
    let mut counts = crate::SoldCounts::new(spec);
    for (i, sku) in spec.skus().iter().enumerate() {
        counts.sold[i] = sku.stock - remaining[i];
    }
    counts
}

fn sku(id: &str) -> SkuId {
    SkuId::new(id).unwrap()
}

fn one(quantity: u32) -> Vec<WantedItem> {
    vec![WantedItem {
        sku: None,
        quantity,
    }]
}

fn named(items: &[(&str, u32)]) -> Vec<WantedItem> {
    items
        .iter()
        .map(|(id, quantity)| WantedItem {
            sku: Some(sku(id)),
            quantity: *quantity,
        })
        .collect()
}

fn shoes() -> SaleSpec {
    let skus = [("us-9", 2), ("us-10", 3)]
        .map(|(id, stock)| SkuSpec { id: sku(id), stock })
        .to_vec();
    SaleSpec::with_skus("shoes", skus)
        .unwrap()
        .per_user_limit(4)
        .unwrap()
        .per_sku_limit(2)
        .unwrap()
        .build()
        .unwrap()
}

#[test]
fn the_window_is_judged_before_the_limit_and_the_limit_before_the_stock() {
    let spec = spec();
    let none = |_| 0;
    // Everything wrong at once: the window answers.
    assert_eq!(
        decide(&spec, at(-1), None, 3, none, &left(&spec, &[0]), &one(5)),
        Err(PurchaseOutcome::NotStarted)
    );
    assert_eq!(
        decide(&spec, at(60), None, 3, none, &left(&spec, &[0]), &one(5)),
        Err(PurchaseOutcome::Ended)
    );
    // Open, over the limit and no stock: the limit answers.
    assert_eq!(
        decide(&spec, at(1), None, 2, none, &left(&spec, &[0]), &one(2)),
        Err(PurchaseOutcome::LimitExceeded {
            already: 2,
            sku: None
        })
    );
    // Within the limit: the stock answers.
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &left(&spec, &[0]), &one(1)),
        Err(PurchaseOutcome::SoldOut)
    );
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &left(&spec, &[1]), &one(2)),
        Err(PurchaseOutcome::InsufficientStock {
            sku: sku("default"),
            remaining: 1
        })
    );
    assert_eq!(
        decide(&spec, at(1), None, 1, none, &left(&spec, &[10]), &one(2)),
        Ok(vec![(0, 2)])
    );
}

#[test]
fn items_name_skus_of_the_sale_before_anything_else_is_judged() {
    let spec = shoes();
    let none = |_| 0;
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &left(&spec, &[2, 3]), &one(1)),
        Err(PurchaseOutcome::SkuRequired)
    );
    assert_eq!(
        decide(
            &spec,
            at(1),
            None,
            9,
            none,
            &left(&spec, &[0, 0]),
            &named(&[("us-9", 1), ("us-11", 1)])
        ),
        Err(PurchaseOutcome::UnknownSku { sku: sku("us-11") })
    );
    // A one-SKU sale takes an unnamed item or its own SKU by name.
    let single = self::spec();
    assert_eq!(resolve(&single, &one(2)), Ok(vec![(0, 2)]));
    assert_eq!(
        resolve(&single, &named(&[("default", 2)])),
        Ok(vec![(0, 2)])
    );
}

#[test]
fn a_bundle_is_all_or_nothing_and_names_its_first_short_item() {
    let spec = shoes();
    let none = |_| 0;
    let bundle = named(&[("us-9", 1), ("us-10", 2)]);
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &left(&spec, &[2, 3]), &bundle),
        Ok(vec![(0, 1), (1, 2)])
    );
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &left(&spec, &[0, 3]), &bundle),
        Err(PurchaseOutcome::InsufficientStock {
            sku: sku("us-9"),
            remaining: 0
        })
    );
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &left(&spec, &[1, 1]), &bundle),
        Err(PurchaseOutcome::InsufficientStock {
            sku: sku("us-10"),
            remaining: 1
        })
    );
    // Sold out only when every SKU is.
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &left(&spec, &[0, 0]), &bundle),
        Err(PurchaseOutcome::SoldOut)
    );
}

#[test]
fn the_per_user_limit_counts_every_sku_and_the_per_sku_limit_each() {
    let spec = shoes();
    assert_eq!(
        decide(
            &spec,
            at(1),
            None,
            3,
            |_| 0,
            &left(&spec, &[2, 3]),
            &named(&[("us-9", 1), ("us-10", 1)])
        ),
        Err(PurchaseOutcome::LimitExceeded {
            already: 3,
            sku: None
        })
    );
    let held = |i| if i == 1 { 2 } else { 0 };
    assert_eq!(
        decide(
            &spec,
            at(1),
            None,
            2,
            held,
            &left(&spec, &[2, 3]),
            &named(&[("us-9", 1), ("us-10", 1)])
        ),
        Err(PurchaseOutcome::LimitExceeded {
            already: 2,
            sku: Some(sku("us-10"))
        })
    );
    assert_eq!(
        decide(
            &spec,
            at(1),
            None,
            2,
            held,
            &left(&spec, &[2, 3]),
            &named(&[("us-9", 2)])
        ),
        Ok(vec![(0, 2)])
    );
}

#[test]
fn the_limit_is_exact_and_never_overflows() {
    let spec = spec();
    assert_eq!(limit(&spec, None, 0, 3), Ok(()));
    assert_eq!(
        limit(&spec, None, 1, 3),
        Err(PurchaseOutcome::LimitExceeded {
            already: 1,
            sku: None
        })
    );
    assert_eq!(
        limit(&spec, None, u32::MAX, u32::MAX),
        Err(PurchaseOutcome::LimitExceeded {
            already: u32::MAX,
            sku: None
        })
    );
}

#[test]
fn the_last_items_go_exactly() {
    let spec = spec();
    assert_eq!(take(&spec, 3, 3), Ok(0));
    assert_eq!(take(&spec, 0, 1), Err(PurchaseOutcome::SoldOut));
    assert_eq!(
        take(&spec, 2, 3),
        Err(PurchaseOutcome::InsufficientStock {
            sku: sku("default"),
            remaining: 2
        })
    );
}

fn members_sale() -> SaleSpec {
    let skus = [("us-9", 10), ("us-10", 4)]
        .map(|(id, stock)| SkuSpec { id: sku(id), stock })
        .to_vec();
    let members = crate::TierSpec {
        name: TierName::new("members").unwrap(),
        reserved: vec![crate::Item {
            sku: sku("us-9"),
            quantity: 6,
        }],
        per_user_limit: Some(5),
        starts_at: Some(at(-10)),
    };
    SaleSpec::with_skus("drop", skus)
        .unwrap()
        .per_user_limit(2)
        .unwrap()
        .starts_at(at(0))
        .tiers(vec![members])
        .release_reserved_at(at(30))
        .build()
        .unwrap()
}

#[test]
fn a_tier_starts_earlier_has_its_own_limit_and_takes_its_reserve_first() {
    let spec = members_sale();
    let member = tier(&spec, Some(&TierName::new("members").unwrap()));
    assert_eq!(member, Some(0));
    assert_eq!(tier(&spec, Some(&TierName::new("gold").unwrap())), None);
    let none = |_| 0;
    let mut sold = crate::SoldCounts::new(&spec);
    let nine = |n| named(&[("us-9", n)]);
    // Before the sale opens, only members buy.
    assert_eq!(
        decide(&spec, at(-5), None, 0, none, &sold, &nine(1)),
        Err(PurchaseOutcome::NotStarted)
    );
    assert!(decide(&spec, at(-5), member, 0, none, &sold, &nine(5)).is_ok());
    // Others see the common stock: 10 - 6 reserved.
    assert_eq!(available(&spec, at(1), None, 0, 0, |_| 0), 4);
    assert_eq!(available(&spec, at(1), member, 0, 0, |_| 0), 10);
    // The members' limit is 5, the others' 2.
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &sold, &nine(3)),
        Err(PurchaseOutcome::LimitExceeded {
            already: 0,
            sku: None
        })
    );
    // Members take 8: 6 from their reserve, 2 from the common stock.
    sold.take(member, &[(0, 8)]);
    assert_eq!(
        available(&spec, at(1), None, 0, 8, |t| sold.tier_sold[t][0]),
        2
    );
    assert_eq!(
        available(&spec, at(1), member, 0, 8, |t| sold.tier_sold[t][0]),
        2
    );
    sold.take(None, &[(0, 2)]);
    assert_eq!(
        decide(&spec, at(1), None, 0, none, &sold, &nine(1)),
        Err(PurchaseOutcome::InsufficientStock {
            sku: sku("us-9"),
            remaining: 0
        })
    );
    // A member's cancel gives back what the members took from the
    // common stock first (2 here), then their reserve (1).
    sold.give_back(member, &[(0, 3)]).unwrap();
    assert_eq!(
        available(&spec, at(1), None, 0, 7, |t| sold.tier_sold[t][0]),
        2
    );
    assert_eq!(
        available(&spec, at(1), member, 0, 7, |t| sold.tier_sold[t][0]),
        3
    );
    // Once released, the reserve is everyone's.
    assert_eq!(
        available(&spec, at(30), None, 0, 7, |t| sold.tier_sold[t][0]),
        3
    );
    assert!(decide(&spec, at(30), None, 0, none, &sold, &nine(2)).is_ok());
    // A SKU without reserves is common to all.
    assert_eq!(available(&spec, at(1), None, 1, 0, |_| 0), 4);
}

#[test]
fn tier_specs_that_do_not_fit_the_sale_are_refused() {
    let skus = vec![SkuSpec {
        id: sku("a"),
        stock: 5,
    }];
    let tier = |name: &str, reserved: &[(&str, u32)], starts: Option<i64>| crate::TierSpec {
        name: TierName::new(name).unwrap(),
        reserved: reserved
            .iter()
            .map(|(id, q)| crate::Item {
                sku: sku(id),
                quantity: *q,
            })
            .collect(),
        per_user_limit: None,
        starts_at: starts.map(at),
    };
    let build = |tiers: Vec<crate::TierSpec>| {
        SaleSpec::with_skus("t", skus.clone())
            .unwrap()
            .starts_at(at(0))
            .ends_at(at(100))
            .tiers(tiers)
            .build()
    };
    assert!(build(vec![tier("m", &[("a", 5)], Some(-1))]).is_ok());
    for (tiers, says) in [
        (vec![tier("m", &[("a", 6)], None)], "more than its stock"),
        (
            vec![tier("m", &[("a", 3)], None), tier("v", &[("a", 3)], None)],
            "more than its stock",
        ),
        (vec![tier("m", &[("b", 1)], None)], "does not have"),
        (
            vec![tier("m", &[], None), tier("m", &[], None)],
            "listed twice",
        ),
        (vec![tier("m", &[], Some(1))], "only start earlier"),
        (vec![tier("m", &[("a", 0)], None)], "reserves 0"),
    ] {
        let error = build(tiers).unwrap_err();
        assert_eq!(error.field, "tiers");
        assert!(error.reason.contains(says), "{error}");
    }
    let released = SaleSpec::with_skus("t", skus.clone())
        .unwrap()
        .release_reserved_at(at(1))
        .build()
        .unwrap_err();
    assert_eq!(released.field, "release_reserved_at");
}
