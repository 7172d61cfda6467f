//! A replayed idempotency key never names an order the store refused: an
//! order Redis accepted whose client was never answered with it (the call
//! timed out as Redis froze) waits in Redis's outbox; when the store then
//! refuses it (the fallback sold the last items meanwhile), a buyer who
//! retries with the key reads 409 `order_failed`, not 202 `pending`. Seen
//! in the frozen-Redis scenario of the multi-instance suite (seed
//! 3564112752615322858): a 202 replay of such an order broke invariant 3.

mod common;

use chrono::Utc;
use common::{Setup, TestServer};
use serde_json::json;
use stockade_core::{Order, OrderId, Purchase, PurchaseOutcome, SaleId};
use stockade_store::arbiter::{Verdict, VoidReason};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_of_an_order_the_store_refused_is_answered_order_failed() {
    let server = TestServer::start(Setup::RedisPostgres).await;
    let (status, body) = server
        .create_sale(json!({"id": "voided-replay", "stock": 2}))
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = server
        .buy("voided-replay", "first", 1, Some("k-first"))
        .await;
    assert_eq!(status, 201, "{body}");
    let state = server.state();
    let sale = SaleId::new("voided-replay").unwrap();
    let epoch = state.book().route(&sale).expect("a route learned").epoch;

    // Redis accepts bob's order, and nobody commits it yet.
    let bob = Purchase::new("voided-replay", "bob", 1)
        .unwrap()
        .with_idempotency_key("k-bob")
        .unwrap()
        .at_epoch(epoch);
    let outcome = state.engine().purchase(&bob).await.unwrap();
    let PurchaseOutcome::Purchased { order_id, .. } = outcome else {
        panic!("Redis sells bob the last item: {outcome:?}");
    };
    // The store sells its last item to someone else, then refuses bob's.
    let carol = Purchase::new("voided-replay", "carol", 1)
        .unwrap()
        .at_epoch(epoch);
    let store = state.store();
    let verdicts = store
        .commit(&[Order::accepted(
            &carol,
            vec![stockade_core::Item {
                sku: stockade_core::SkuId::default_sku(),
                quantity: carol.quantity(),
            }],
            None,
            OrderId::generate(),
            Utc::now(),
        )])
        .await
        .unwrap();
    assert_eq!(verdicts, vec![Verdict::Committed]);
    let verdicts = store
        .commit(&[Order::accepted(
            &bob,
            vec![stockade_core::Item {
                sku: stockade_core::SkuId::default_sku(),
                quantity: bob.quantity(),
            }],
            None,
            order_id,
            Utc::now(),
        )])
        .await
        .unwrap();
    assert_eq!(verdicts, vec![Verdict::Void(VoidReason::Oversold)]);

    // Bob retries with his key: Redis knows it, its outbox still holds the
    // order, the store has refused it.
    let (status, body) = server.buy("voided-replay", "bob", 1, Some("k-bob")).await;
    assert_eq!(status, 409, "the replay names a refused order: {body}");
    assert_eq!(body["error"]["code"], "order_failed", "{body}");
    assert_eq!(body["error"]["order_id"], order_id.to_string(), "{body}");
}

/// Issue 35 item 10: a key replayed with other SKUs, other quantities per
/// SKU (the same total) or another tier is `idempotency_key_reused`, on
/// every engine; the same request (its items in another order, a tier the
/// sale does not name for none) is the first order again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_must_match_the_whole_request() {
    for setup in [Setup::Embedded, Setup::RedisPostgres, Setup::Postgres] {
        let server = TestServer::start(setup).await;
        let (status, body) = server
            .create_sale(json!({
                "id": "whole",
                "skus": [{"id": "a", "stock": 10}, {"id": "b", "stock": 10}],
                "per_user_limit": 5,
                "tiers": [{"name": "members", "reserved": {"a": 2}}],
            }))
            .await;
        assert_eq!(status, 201, "{setup:?}: {body}");
        let bundle = json!([{"sku": "a", "quantity": 1}, {"sku": "b", "quantity": 1}]);
        let buy = |body: serde_json::Value, key: &'static str| {
            let server = &server;
            async move {
                let request = server
                    .client
                    .post(server.at("/v1/sales/whole/purchases"))
                    .header("Idempotency-Key", key)
                    .json(&body);
                common::split(request.send().await.unwrap()).await
            }
        };
        let (status, first) = buy(json!({"user_id": "ann", "items": bundle}), "k1").await;
        assert_eq!(status, 201, "{setup:?}: {first}");
        for (what, other) in [
            (
                "other SKUs",
                json!({"user_id": "ann", "items": [{"sku": "a", "quantity": 2}]}),
            ),
            (
                "one SKU of the two",
                json!({"user_id": "ann", "sku": "b", "quantity": 2}),
            ),
            (
                "a tier",
                json!({"user_id": "ann", "items": bundle, "tier": "members"}),
            ),
        ] {
            let (status, body) = buy(other, "k1").await;
            assert_eq!(status, 422, "{setup:?}: {what}: {body}");
            assert_eq!(
                body["error"]["code"], "idempotency_key_reused",
                "{setup:?}: {what}"
            );
        }
        let reordered = json!([{"sku": "b", "quantity": 1}, {"sku": "a", "quantity": 1}]);
        for (what, same) in [
            (
                "the same bundle",
                json!({"user_id": "ann", "items": bundle}),
            ),
            (
                "its items reordered",
                json!({"user_id": "ann", "items": reordered}),
            ),
            (
                "a tier the sale lacks",
                json!({"user_id": "ann", "items": bundle, "tier": "gold"}),
            ),
        ] {
            let (status, body) = buy(same, "k1").await;
            assert_eq!(status, 200, "{setup:?}: {what}: {body}");
            assert_eq!(body["order_id"], first["order_id"], "{setup:?}: {what}");
        }
        // A member's key replayed without the tier is another request too.
        let member = json!({"user_id": "meg", "sku": "a", "tier": "members"});
        let (status, body) = buy(member, "k2").await;
        assert_eq!(status, 201, "{setup:?}: {body}");
        let (status, body) = buy(json!({"user_id": "meg", "sku": "a"}), "k2").await;
        assert_eq!(status, 422, "{setup:?}: tier dropped: {body}");
        let (_, sale) = server.get("/v1/sales/whole").await;
        assert_eq!(sale["skus"][0]["sold"], 2, "{setup:?}: {sale}");
        assert_eq!(sale["skus"][1]["sold"], 1, "{setup:?}: {sale}");
    }
}
