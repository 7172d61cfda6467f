//! A replayed idempotency key never names an order the store refused: an
//! order Redis accepted whose client was never answered with it (the call
//! timed out as Redis froze) waits in Redis's outbox; when the store then
//! refuses it (the fallback sold the last items meanwhile), a buyer who
//! retries with the key reads 409 `order_failed`, not 202 `pending`. Seen
//! in the frozen-Redis scenario of the multi-instance suite (seed
//! 3564112752615322858): a 202 replay of such an order broke invariant 3.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use common::{Setup, TestServer};
use serde_json::json;
use stockade_core::{
    Clock, Engine, Epoch, Item, Order, OrderId, Purchase, PurchaseOutcome, SaleId, SaleSpec, SkuId,
    SystemClock,
};
use stockade_engine::{RedisEngine, RedisEngineConfig};
use stockade_server::activity::Board;
use stockade_server::purchase::{Attempt, Decision, PurchaseError, Purchases};
use stockade_server::rate_limit::{RateLimiter, RateLimits};
use stockade_server::state::{AppState, StateParts};
use stockade_server::waiting_room::WaitingRooms;
use stockade_server::waiting_room::door::AdmissionToken;
use stockade_server::waiting_room::memory::MemoryQueues;
use stockade_server::writer::{CommitQueue, WriterConfig};
use stockade_store::OrderStore;
use stockade_store::arbiter::{Verdict, VoidReason};
use stockade_store::authority::{Advance, Authority};
use stockade_test_support::{PostgresServer, RedisServer};

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

/// One instance over a real Redis and PostgreSQL, built by hand: no
/// reconciler runs, so nothing commits, rebuilds or sweeps behind the
/// test's back. Sale `sale` (5 items) exists in the store and the engine.
struct Bare {
    state: AppState,
    redis_engine: Arc<RedisEngine>,
    redis: RedisServer,
    _postgres: PostgresServer,
}

impl Bare {
    async fn start(sale: &str) -> Self {
        let redis = RedisServer::start().unwrap();
        let postgres = PostgresServer::start().unwrap();
        let store = OrderStore::open(&postgres.fresh_database().await.unwrap())
            .await
            .unwrap();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let config = RedisEngineConfig::from_url(&redis.url()).unwrap();
        let redis_engine = Arc::new(
            RedisEngine::connect(&config, Arc::clone(&clock))
                .await
                .unwrap(),
        );
        let engine: Arc<dyn Engine> = redis_engine.clone();
        let activity = Arc::new(Board::default());
        let (queue, _writer) = CommitQueue::start(
            store.clone(),
            Arc::clone(&engine),
            WriterConfig::default(),
            Arc::clone(&activity),
        );
        let spec = SaleSpec::builder(sale, 5).unwrap().build().unwrap();
        store.save_sale(&spec, clock.now()).await.unwrap();
        engine.create_sale(&spec).await.unwrap();
        let state = AppState::new(StateParts {
            engine,
            fallback: false,
            locks: None,
            store,
            queue,
            clock: Arc::clone(&clock),
            admin_token: common::TOKEN.into(),
            payments_token: None,
            draw_key: None,
            secure_cookies: false,
            commit_deadline: Duration::from_secs(3),
            rejection_ttl: Duration::ZERO,
            max_purchases_in_flight: 64,
            identity: None,
            rate_limiter: RateLimiter::local(RateLimits::default(), clock),
            dashboard_session_ttl: Duration::from_secs(3_600),
            waiting_rooms: WaitingRooms::new(Arc::new(MemoryQueues::new()), b"replays-secret"),
            journal: None,
            activity,
        });
        stockade_server::recovery::recover_at_start(&state)
            .await
            .unwrap();
        Self {
            state,
            redis_engine,
            redis,
            _postgres: postgres,
        }
    }

    /// The engine accepts `buyer`'s purchase with key `key` under `epoch`
    /// and binds the key, as for a purchase another instance sent; then
    /// the outbox this instance reads loses the entry, as a promoted
    /// replica that never had it. The order lives only in the other
    /// instance's writer: here, the returned order, committed by the test.
    async fn accepted_elsewhere(&self, sale: &str, buyer: &str, key: &str) -> Order {
        let epoch = self.epoch(sale).await;
        let purchase = Purchase::new(sale, buyer, 1)
            .unwrap()
            .with_idempotency_key(key)
            .unwrap()
            .at_epoch(epoch);
        let outcome = self.state.engine().purchase(&purchase).await.unwrap();
        let PurchaseOutcome::Purchased { order_id, .. } = outcome else {
            panic!("the engine sells {buyer} an item: {outcome:?}");
        };
        let outbox = self.redis_engine.keys(purchase.sale_id()).outbox;
        self.redis.command(&["DEL", outbox.as_str()]).unwrap();
        let sale_id = SaleId::new(sale).unwrap();
        assert!(
            self.state
                .engine()
                .outbox(&sale_id)
                .await
                .unwrap()
                .is_empty(),
            "the outbox read here lacks the order"
        );
        let items = vec![Item {
            sku: SkuId::default_sku(),
            quantity: 1,
        }];
        Order::accepted(&purchase, items, None, order_id, Utc::now())
    }

    async fn epoch(&self, sale: &str) -> Epoch {
        let sale = SaleId::new(sale).unwrap();
        self.state
            .store()
            .sale_state(&sale)
            .await
            .unwrap()
            .unwrap()
            .epoch
    }

    /// `buyer` retries with `key`, through this instance's pipeline.
    async fn replay(&self, sale: &str, buyer: &str, key: &str) -> Result<Decision, PurchaseError> {
        let purchase = Purchase::new(sale, buyer, 1)
            .unwrap()
            .with_idempotency_key(key)
            .unwrap();
        Purchases::new(&self.state)
            .decide(Attempt {
                purchase,
                respond_async: false,
                admission: AdmissionToken::Missing,
            })
            .await
    }
}

/// The multi-instance Sentinel failover scenario saw a repeat answered 409
/// `order_failed` for an order the store then committed: the engine named
/// the key's order, and neither the store, this instance's writer nor the
/// outbox it read held it (another instance's writer did, and the outbox
/// was read from the new primary, which never had the entry). While the
/// store may still commit it, a replay says "retry with the same key"; once
/// the store has it, the replay names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_of_an_order_committing_elsewhere_is_never_order_failed() {
    let bare = Bare::start("elsewhere").await;
    let order = bare.accepted_elsewhere("elsewhere", "bob", "k-bob").await;

    let answer = bare.replay("elsewhere", "bob", "k-bob").await;
    assert!(
        matches!(answer, Err(PurchaseError::ReplayNotCommitted)),
        "an order that may still commit is not known yet: {answer:?}"
    );

    // The other instance's writer commits it.
    let verdicts = bare
        .state
        .store()
        .commit(std::slice::from_ref(&order))
        .await
        .unwrap();
    assert_eq!(verdicts, vec![Verdict::Committed]);
    match bare.replay("elsewhere", "bob", "k-bob").await {
        Ok(Decision::Replayed {
            order: replayed,
            committed: true,
        }) => assert_eq!(replayed.id, order.id),
        other => panic!("the replay names the committed order: {other:?}"),
    }
}

/// The definite end: once the store has moved the sale past the epoch the
/// key's order was decided under (a rebuild after the failover), the order
/// can never commit, and a replay still reaching the old engine state is
/// answered 409 `order_failed`, not told to retry forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replay_of_an_order_no_epoch_accepts_is_order_failed() {
    let bare = Bare::start("left-behind").await;
    let order = bare.accepted_elsewhere("left-behind", "bob", "k-bob").await;
    assert!(matches!(
        bare.replay("left-behind", "bob", "k-bob").await,
        Err(PurchaseError::ReplayNotCommitted)
    ));

    // A rebuild elsewhere advances the store's epoch; this instance's
    // route and the engine it reaches are still the old epoch's.
    let sale = SaleId::new("left-behind").unwrap();
    let advanced = bare
        .state
        .store()
        .advance_epoch(&sale, order.epoch, Authority::Primary)
        .await
        .unwrap();
    assert!(matches!(advanced, Advance::Advanced(_)), "{advanced:?}");
    let answer = bare.replay("left-behind", "bob", "k-bob").await;
    assert!(
        matches!(answer, Err(PurchaseError::OrderFailed(id)) if id == order.id),
        "an order no epoch accepts is failed for good: {answer:?}"
    );
    // And it is so: its commit is refused.
    let verdicts = bare.state.store().commit(&[order]).await.unwrap();
    assert!(
        matches!(verdicts[..], [Verdict::Void(VoidReason::StaleEpoch { .. })]),
        "{verdicts:?}"
    );
}

/// A buyer whose 201 was lost retries with the key and reaches an engine
/// that lacks it (a failover promoted a replica without the write, or the
/// instance still reaches a primary the failover deposed) after the sale
/// sold out: the store has the key's order, so the retry is answered with
/// it, not refused (409 `limit_exceeded` here, the engine's first check;
/// `sold_out` in the simulator). Found by the simulator: `stockade sim
/// --seed 0x5eed0104 --lost-answers`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_keyed_retry_an_engine_forgot_is_answered_with_the_stores_order() {
    let bare = Bare::start("forgot").await;
    let first = match bare.replay("forgot", "bob", "k-bob").await {
        Ok(Decision::Committed { order, .. }) => order,
        other => panic!("bob buys the first item: {other:?}"),
    };
    for buyer in ["ann", "cy", "di", "ed"] {
        let bought = bare.replay("forgot", buyer, &format!("k-{buyer}")).await;
        assert!(
            matches!(bought, Ok(Decision::Committed { .. })),
            "{buyer}: {bought:?}"
        );
    }
    // The engine forgets every key, as a replica promoted before the
    // writes of the keys reached it.
    let keys = bare.redis_engine.keys(&SaleId::new("forgot").unwrap()).keys;
    bare.redis.command(&["DEL", keys.as_str()]).unwrap();

    match bare.replay("forgot", "bob", "k-bob").await {
        Ok(Decision::Replayed {
            order,
            committed: true,
        }) => assert_eq!(order.id, first.id),
        other => panic!("bob's retry names the order the store has: {other:?}"),
    }
    // A keyed purchase the store has no order for is still refused.
    let late = bare.replay("forgot", "fay", "k-fay").await;
    assert!(
        matches!(
            late,
            Err(PurchaseError::Refused {
                outcome: PurchaseOutcome::SoldOut,
                ..
            })
        ),
        "{late:?}"
    );
}
