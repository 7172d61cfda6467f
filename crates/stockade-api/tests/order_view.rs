//! [`OrderView`] renders an order as the same JSON as the [`OrderBody`]
//! made from it: the borrowed renderer the purchase answer uses must never
//! drift from the API's documented shape.

use chrono::{TimeZone, Utc};
use stockade_api::{OrderBody, OrderView};
use stockade_core::{Epoch, Item, Order, OrderId, OrderStatus, SaleId, SkuId, TierName, UserId};

fn order(items: &[(&str, u32)], tier: Option<&str>, held: bool) -> Order {
    let created_at = Utc.timestamp_millis_opt(1_795_000_000_123).unwrap();
    Order {
        id: OrderId::generate(),
        sale_id: SaleId::new("drop-1").unwrap(),
        user_id: UserId::new("buyer_7").unwrap(),
        quantity: items.iter().map(|(_, n)| n).sum(),
        items: items
            .iter()
            .map(|(sku, quantity)| Item {
                sku: SkuId::new(*sku).unwrap(),
                quantity: *quantity,
            })
            .collect(),
        tier: tier.map(|t| TierName::new(t).unwrap()),
        idempotency_key: None,
        status: if held {
            OrderStatus::Held
        } else {
            OrderStatus::Confirmed
        },
        created_at,
        expires_at: held.then(|| created_at + chrono::Duration::milliseconds(600_000)),
        epoch: Epoch::FIRST,
    }
}

#[test]
fn the_view_and_the_body_are_the_same_json() {
    let orders = [
        order(&[("default", 1)], None, false),
        order(&[("shoes", 2), ("socks", 3)], Some("members"), true),
        order(&[], None, false),
        order(&[("default", 4)], Some("vip"), false),
    ];
    for order in &orders {
        let body = serde_json::to_string(&OrderBody::from_order(order)).unwrap();
        let view = serde_json::to_string(&OrderView::of(order)).unwrap();
        assert_eq!(view, body, "stored status");

        let body = serde_json::to_string(&OrderBody::pending(order)).unwrap();
        let view = serde_json::to_string(&OrderView::pending(order)).unwrap();
        assert_eq!(view, body, "pending");

        let mut body = OrderBody::from_order(order);
        body.remaining = Some(17);
        let body = serde_json::to_string(&body).unwrap();
        let view = serde_json::to_string(&OrderView::of(order).with_remaining(17)).unwrap();
        assert_eq!(view, body, "with remaining");
        assert!(view.contains(r#""remaining":17"#), "{view}");
        assert_eq!(
            OrderView::of(order).order_id().to_string(),
            order.id.to_string()
        );
    }
}
