//! The checker on sales of several SKUs: hand-made histories of bundles,
//! each bad one reported under the right invariant.

use serde_json::json;

use crate::checker::{Violation, check, check_with_skus};
use crate::checker_tests::{error, invariants, order, purchase, report, stored};
use crate::evidence::{Evidence, Healing, SkuStock, StoreOrder, Terms};
use crate::history::{Answer, History, Item, Purchase};

fn items(of: &[(&str, u32)]) -> Vec<Item> {
    of.iter().map(|&(sku, n)| Item::new(sku, n)).collect()
}

/// A purchase naming `of` (one SKU, or a bundle).
fn bundle(
    instance: usize,
    buyer: &str,
    of: &[(&str, u32)],
    key: Option<&str>,
    answer: Answer,
) -> Purchase {
    let quantity = of.iter().map(|&(_, n)| n).sum();
    let mut purchase = purchase(instance, buyer, quantity, key, answer);
    purchase.request.items = Some(items(of));
    purchase
}

/// An order of the store with items `of`.
fn stored_bundle(id: &str, buyer: &str, of: &[(&str, u32)]) -> StoreOrder {
    let quantity = of.iter().map(|&(_, n)| u64::from(n)).sum();
    StoreOrder {
        items: items(of),
        ..stored(id, buyer, quantity, "confirmed")
    }
}

fn short(sku: &str, remaining: u32) -> Answer {
    Answer::Http {
        status: 409,
        body: json!({"error": {"code": "insufficient_stock", "message": "...", "sku": sku,
                               "remaining": remaining}}),
        retry_after: None,
    }
}

fn skus() -> Vec<SkuStock> {
    [("a", 2), ("b", 3)]
        .iter()
        .map(|&(id, stock)| SkuStock {
            id: id.into(),
            stock,
        })
        .collect()
}

/// The checker on a sale of SKUs [`skus`].
fn check_skus(evidence: &Evidence) -> Vec<Violation> {
    check_with_skus(evidence, &skus())
}

/// SKUs a (2) and b (3), limit 2: u1 buys a+b with a key (and replays it
/// elsewhere), u3 buys the last a, u4's a+b finds a empty, u2 buys the
/// last two b, u5 finds the sale sold out.
fn good_bundles() -> Evidence {
    Evidence {
        terms: Terms {
            sale: "b".into(),
            stock: 5,
            per_user_limit: 2,
            hold_seconds: None,
        },
        history: History {
            purchases: vec![
                bundle(
                    0,
                    "u1",
                    &[("a", 1), ("b", 1)],
                    Some("k1"),
                    order(201, "o1", "u1", 2),
                ),
                bundle(
                    1,
                    "u1",
                    &[("a", 1), ("b", 1)],
                    Some("k1"),
                    order(200, "o1", "u1", 2),
                ),
                bundle(2, "u3", &[("a", 1)], None, order(201, "o3", "u3", 1)),
                bundle(0, "u4", &[("a", 1), ("b", 1)], None, short("a", 0)),
                bundle(1, "u2", &[("b", 2)], None, order(201, "o2", "u2", 2)),
                bundle(2, "u5", &[("b", 1)], None, error(409, "sold_out")),
            ],
            cancels: vec![],
            confirms: vec![],
        },
        store: Ok(vec![
            // The store may list a bundle's items in another order.
            stored_bundle("o1", "u1", &[("b", 1), ("a", 1)]),
            stored_bundle("o3", "u3", &[("a", 1)]),
            stored_bundle("o2", "u2", &[("b", 2)]),
        ]),
        healing: Healing::healed(3, 5, &skus()),
        expiry_counters: None,
    }
}

#[test]
fn a_good_history_of_bundles_passes() {
    let violations = check_skus(&good_bundles());
    assert!(violations.is_empty(), "{}", report(&violations));
}

/// u3's item came out of b instead of a: the total is right, but b is
/// oversold (and a left unsold).
#[test]
fn one_sku_oversold_while_the_total_is_right_is_reported() {
    let mut evidence = good_bundles();
    evidence.history.purchases[2] = bundle(2, "u3", &[("b", 1)], None, order(201, "o3", "u3", 1));
    evidence.store.as_mut().unwrap()[1] = stored_bundle("o3", "u3", &[("b", 1)]);
    let violations = check_skus(&evidence);
    assert_eq!(invariants(&violations), [1, 5], "{}", report(&violations));
    assert!(
        violations[0]
            .message
            .contains("SKU b: live orders hold 4 items of a stock of 3: oversold by 1"),
        "{}",
        report(&violations)
    );
    assert!(
        violations[1]
            .message
            .contains("SKU a: 1 items, not its stock of 2"),
        "{}",
        report(&violations)
    );
}

/// The last a was never sold: the store is short of it, and instance 1
/// says so; instance 2 even reports the right totals, but not for a.
#[test]
fn one_sku_undersold_is_reported() {
    let mut evidence = good_bundles();
    evidence.history.purchases.remove(2);
    evidence.store.as_mut().unwrap().remove(1);
    let view = |remaining: u32, sold: u32| Answer::Http {
        status: 200,
        body: json!({"stock": 5, "remaining": remaining, "sold": sold, "skus": [
            {"id": "a", "stock": 2, "remaining": 1, "sold": 1, "status": "open"},
            {"id": "b", "stock": 3, "remaining": 0, "sold": 3, "status": "sold_out"},
        ]}),
        retry_after: None,
    };
    evidence.healing.sale_views[1] = view(1, 4);
    evidence.healing.sale_views[2] = view(0, 5);
    let violations = check_skus(&evidence);
    assert_eq!(
        invariants(&violations),
        [5, 5, 5, 5, 5],
        "{}",
        report(&violations)
    );
    let text = report(&violations);
    assert!(
        text.contains("live orders hold 4 items, not the stock of 5"),
        "{text}"
    );
    assert!(
        text.contains("do not hold the stock of 1 SKUs\n      SKU a: 1 items, not its stock of 2"),
        "{text}"
    );
    assert!(
        text.contains("instance 1 reports remaining 1 and sold 4"),
        "{text}"
    );
    for instance in [1, 2] {
        assert!(
            text.contains(&format!(
                "instance {instance} reports 1 SKUs not sold out after selling out\n      \
                 SKU a: stock 2, remaining 1, sold 1 (expected 2, 0 and 2)"
            )),
            "{text}"
        );
    }
}

#[test]
fn a_sale_view_without_a_sku_is_reported() {
    let mut evidence = good_bundles();
    evidence.healing.sale_views[0] = Answer::Http {
        status: 200,
        body: json!({"stock": 5, "remaining": 0, "sold": 5}),
        retry_after: None,
    };
    let violations = check_skus(&evidence);
    assert_eq!(invariants(&violations), [5], "{}", report(&violations));
    assert!(
        violations[0].message.contains("SKU a is missing")
            && violations[0].message.contains("SKU b is missing"),
        "{}",
        report(&violations)
    );
}

/// o1's items lost b: they no longer add up to its quantity, the 201 no
/// longer matches it, and b is short.
#[test]
fn items_that_do_not_add_up_are_reported() {
    let mut evidence = good_bundles();
    evidence.store.as_mut().unwrap()[0].items = items(&[("a", 1)]);
    let violations = check_skus(&evidence);
    assert_eq!(
        invariants(&violations),
        [1, 3, 5],
        "{}",
        report(&violations)
    );
    let text = report(&violations);
    assert!(
        text.contains("order o1 of buyer u1 ×2 (confirmed) whose items [a×1] add up to 1"),
        "{text}"
    );
    assert!(
        text.contains(
            "201 on instance 0 for buyer u1 ×2 [a×1+b×1] (key k1) names order o1, \
             which the store has with items [a×1]"
        ),
        "{text}"
    );
}

#[test]
fn an_item_of_a_sku_the_sale_does_not_have_is_reported() {
    let mut evidence = good_bundles();
    evidence.store.as_mut().unwrap()[2].items = items(&[("b", 1), ("z", 1)]);
    let text = report(&check_skus(&evidence));
    assert!(
        text.contains("whose items [b×1+z×1] name SKUs the sale does not have: z"),
        "{text}"
    );
}

/// A sale of one SKU: an order listed without items is reported too; with
/// its `default` item it passes (see `checker_tests`).
#[test]
fn an_order_of_one_sku_listed_without_items_is_reported() {
    let mut evidence = good_bundles();
    evidence.history.purchases.clear();
    evidence.healing = Healing::healed(3, 5, &[]);
    evidence.store = Ok(vec![
        stored("o1", "u1", 2, "confirmed"),
        stored("o2", "u2", 2, "confirmed"),
        StoreOrder {
            items: vec![],
            ..stored("o3", "u3", 1, "confirmed")
        },
    ]);
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [1], "{}", report(&violations));
    assert!(
        violations[0]
            .message
            .contains("order o3 of buyer u3 ×1 (confirmed) whose items [] add up to 0"),
        "{}",
        report(&violations)
    );
}
