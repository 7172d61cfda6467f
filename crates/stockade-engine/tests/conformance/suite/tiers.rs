//! Buyer tiers: a reserve per SKU kept for a tier's buyers, their own
//! per-user limit and earlier start, the release of the reserves at
//! `release_reserved_at` (on the engine's manual clock), and a rebuild
//! that keeps what each tier holds.

use chrono::{DateTime, TimeDelta, Utc};
use stockade_core::{
    Engine, Epoch, Item, OrderStatus, Purchase, PurchaseOutcome, SaleSpec, SkuId, SkuSpec,
    TierName, TierSpec, WantedItem,
};

use super::helpers::{order, sale, user};
use crate::harness::Harness;

fn sku(id: &str) -> SkuId {
    SkuId::new(id).unwrap()
}

/// Shoes `a` (10, 6 of them reserved for members) and `b` (4): members
/// may hold 5 and start 10 s early, others 2; the reserve is released at
/// `opens + 60 s`.
fn members_sale(id: &str, opens: DateTime<Utc>) -> SaleSpec {
    let skus = [("a", 10), ("b", 4)]
        .map(|(id, stock)| SkuSpec { id: sku(id), stock })
        .to_vec();
    let members = TierSpec {
        name: TierName::new("members").unwrap(),
        reserved: vec![Item {
            sku: sku("a"),
            quantity: 6,
        }],
        per_user_limit: Some(5),
        starts_at: Some(opens - TimeDelta::seconds(10)),
    };
    SaleSpec::with_skus(id, skus)
        .unwrap()
        .per_user_limit(2)
        .unwrap()
        .starts_at(opens)
        .tiers(vec![members])
        .release_reserved_at(opens + TimeDelta::seconds(60))
        .build()
        .unwrap()
}

fn buying(sale_id: &str, buyer: &str, tier: Option<&str>, items: &[(&str, u32)]) -> Purchase {
    let wanted = items
        .iter()
        .map(|(id, quantity)| WantedItem {
            sku: Some(sku(id)),
            quantity: *quantity,
        })
        .collect();
    let purchase = Purchase::of_items(sale(sale_id), user(buyer), wanted).unwrap();
    match tier {
        Some(tier) => purchase.with_tier(TierName::new(tier).unwrap()),
        None => purchase,
    }
}

async fn buy(
    e: &dyn Engine,
    sale_id: &str,
    buyer: &str,
    tier: Option<&str>,
    items: &[(&str, u32)],
) -> PurchaseOutcome {
    e.purchase(&buying(sale_id, buyer, tier, items))
        .await
        .unwrap()
}

fn bought(outcome: &PurchaseOutcome) -> bool {
    matches!(outcome, PurchaseOutcome::Purchased { .. })
}

fn short_of_a(left: u32) -> PurchaseOutcome {
    PurchaseOutcome::InsufficientStock {
        sku: sku("a"),
        remaining: left,
    }
}

pub async fn a_tier_starts_earlier_takes_its_reserve_and_the_rest_is_released_on_time(h: &Harness) {
    let e = h.engine.as_ref();
    let opens = h.clock_now() + TimeDelta::seconds(30);
    e.create_sale(&members_sale("tiered", opens)).await.unwrap();
    // Ten seconds before the sale: members only.
    h.clock.set(opens - TimeDelta::seconds(5));
    assert_eq!(
        buy(e, "tiered", "outsider", None, &[("a", 1)]).await,
        PurchaseOutcome::NotStarted
    );
    // A tier the sale does not name makes no difference.
    assert_eq!(
        buy(e, "tiered", "gold", Some("gold"), &[("a", 1)]).await,
        PurchaseOutcome::NotStarted
    );
    // The members' limit is theirs: 5, where others have 2.
    assert!(bought(
        &buy(e, "tiered", "m1", Some("members"), &[("a", 3)]).await
    ));
    assert_eq!(
        buy(e, "tiered", "m1", Some("members"), &[("a", 3)]).await,
        PurchaseOutcome::LimitExceeded {
            already: 3,
            sku: None
        }
    );
    // The sale opens: others see a's common stock, 10 - 6 reserved.
    h.clock.set(opens + TimeDelta::seconds(1));
    assert!(bought(&buy(e, "tiered", "o1", None, &[("a", 2)]).await));
    assert!(bought(&buy(e, "tiered", "o2", None, &[("a", 2)]).await));
    assert_eq!(
        buy(e, "tiered", "o3", None, &[("a", 1)]).await,
        short_of_a(0)
    );
    // b reserves nothing: everyone's.
    assert!(bought(&buy(e, "tiered", "o3", None, &[("b", 2)]).await));
    // Members still have their reserve: 6 - 3 taken.
    assert!(bought(
        &buy(e, "tiered", "m2", Some("members"), &[("a", 2)]).await
    ));
    assert_eq!(
        buy(e, "tiered", "m3", Some("members"), &[("a", 2)]).await,
        short_of_a(1)
    );
    // At the release, the reserve left is everyone's.
    h.clock.set(opens + TimeDelta::seconds(60));
    assert!(bought(&buy(e, "tiered", "o4", None, &[("a", 1)]).await));
    let snapshot = e.snapshot(&sale("tiered")).await.unwrap().unwrap();
    assert_eq!(snapshot.skus[0].remaining, 0);
    assert_eq!(snapshot.skus[1].remaining, 2);
}

pub async fn a_members_cancel_returns_what_it_took_from_the_common_stock_first(h: &Harness) {
    let e = h.engine.as_ref();
    let opens = h.clock_now();
    e.create_sale(&members_sale("tier-cancel", opens))
        .await
        .unwrap();
    h.clock.set(opens + TimeDelta::seconds(1));
    // 5 + 3 by members: 6 from the reserve, 2 from the common stock.
    let PurchaseOutcome::Purchased {
        order_id: first, ..
    } = buy(e, "tier-cancel", "m1", Some("members"), &[("a", 5)]).await
    else {
        panic!("members buy first");
    };
    assert!(bought(
        &buy(e, "tier-cancel", "m2", Some("members"), &[("a", 3)]).await
    ));
    assert!(bought(
        &buy(e, "tier-cancel", "o1", None, &[("a", 2)]).await
    ));
    assert_eq!(
        buy(e, "tier-cancel", "o2", None, &[("a", 1)]).await,
        short_of_a(0)
    );
    // m1's five go back: two to the common stock, three to the reserve.
    e.release(&sale("tier-cancel"), first, Epoch::FIRST)
        .await
        .unwrap();
    assert_eq!(
        buy(e, "tier-cancel", "o2", None, &[("a", 2)]).await.label(),
        "purchased"
    );
    assert_eq!(
        buy(e, "tier-cancel", "o3", None, &[("a", 1)]).await,
        short_of_a(0)
    );
    assert!(bought(
        &buy(e, "tier-cancel", "m3", Some("members"), &[("a", 3)]).await
    ));
}

pub async fn rebuild_keeps_what_each_tier_holds(h: &Harness) {
    let e = h.engine.as_ref();
    let opens = h.clock_now();
    let spec = members_sale("tier-rebuilt", opens);
    e.create_sale(&spec).await.unwrap();
    h.clock.set(opens + TimeDelta::seconds(1));
    let of = |buyer: &str, quantity: u32, tier: Option<&str>| {
        let mut o = order(
            "tier-rebuilt",
            buyer,
            quantity,
            OrderStatus::Confirmed,
            None,
        );
        o.items = vec![Item {
            sku: sku("a"),
            quantity,
        }];
        o.tier = tier.map(|t| TierName::new(t).unwrap());
        o
    };
    // Members hold 4 of a's reserve of 6; others hold 4, all of the common.
    let orders = [
        of("m1", 4, Some("members")),
        of("o1", 2, None),
        of("o2", 2, None),
    ];
    let epoch = Epoch::new(2);
    e.rebuild(&spec, epoch, &orders).await.unwrap();
    let at = |p: Purchase| p.at_epoch(epoch);
    assert_eq!(
        e.purchase(&at(buying("tier-rebuilt", "o3", None, &[("a", 1)])))
            .await
            .unwrap(),
        short_of_a(0)
    );
    assert!(bought(
        &e.purchase(&at(buying(
            "tier-rebuilt",
            "m2",
            Some("members"),
            &[("a", 2)]
        )))
        .await
        .unwrap()
    ));
    assert_eq!(
        e.purchase(&at(buying(
            "tier-rebuilt",
            "m3",
            Some("members"),
            &[("a", 1)]
        )))
        .await
        .unwrap(),
        short_of_a(0)
    );
}

/// Issue 35 item 8, on the engine: a non-member refused `not_started`
/// inside the members' earlier window changes nothing for the members
/// who buy after them.
pub async fn members_keep_their_earlier_window_after_a_non_member_is_refused(h: &Harness) {
    let e = h.engine.as_ref();
    let opens = h.clock_now() + TimeDelta::seconds(30);
    e.create_sale(&members_sale("early", opens)).await.unwrap();
    h.clock.set(opens - TimeDelta::seconds(5));
    assert!(bought(
        &buy(e, "early", "m1", Some("members"), &[("a", 1)]).await
    ));
    assert_eq!(
        buy(e, "early", "outsider", None, &[("a", 1)]).await,
        PurchaseOutcome::NotStarted
    );
    for member in ["m2", "m3"] {
        let outcome = buy(e, "early", member, Some("members"), &[("a", 1)]).await;
        assert!(bought(&outcome), "{member}: {outcome:?}");
    }
    let snapshot = e.snapshot(&sale("early")).await.unwrap().unwrap();
    assert_eq!(snapshot.skus[0].remaining, 7);
}
