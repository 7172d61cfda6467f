//! The oracle's checks that read the store, each shown to report the
//! broken promise it names: a real instance sells, and the history the
//! buyers "saw" is written by hand to contradict the store.

use std::collections::BTreeMap;

use chrono::TimeDelta;
use serde_json::json;
use stockade_sim::clock::{SimClock, TrueTime};
use stockade_sim::events;
use stockade_sim::history::{FaultSpan, History, Judged, Named, Voided};
use stockade_sim::oracle;
use stockade_sim::scenario::{Engine, Fault, Sale, Sku};
use stockade_sim::world::{World, json_request};

fn sale() -> Sale {
    Sale {
        id: "drop".into(),
        skus: vec![Sku {
            id: "s0".into(),
            stock: 10,
        }],
        per_user_limit: 2,
        per_sku_limit: None,
        hold_seconds: None,
        starts_ms: 0,
        ends_ms: None,
        tiers: Vec::new(),
        release_reserved_ms: None,
        draw_close_ms: None,
    }
}

/// What the oracle is told besides the history.
struct Told {
    /// Alice's limit.
    limit: u32,
    /// The sale's `remaining` at the end, as the service answered it.
    remaining: i64,
    /// The sale's payment hold, in seconds.
    hold_seconds: Option<u32>,
    /// When the end is judged, seconds after the run's start.
    end_s: i64,
}

const TRUE: Told = Told {
    limit: 2,
    remaining: 9,
    hold_seconds: None,
    end_s: 60,
};

/// Sells one item to `alice` under key `k1` on a fresh embedded instance,
/// then judges `history` (given the order's id) against the store, with
/// what else the oracle is `told`: the violations.
async fn judged_after_one_sale(told: Told, history: impl FnOnce(&str) -> History) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let time = TrueTime::start();
    let clock = SimClock::new(time, TimeDelta::zero(), 0);
    let mut world =
        World::new(dir.path(), Engine::Memory, vec![clock.clone()], clock, None).unwrap();
    world.start(0).await.unwrap();
    let gateway = world.gateway();
    let sale = Sale {
        hold_seconds: told.hold_seconds,
        ..sale()
    };
    let created = gateway
        .call(0, json_request("POST", "/v1/sales", &sale.body(), true))
        .await;
    assert!(matches!(created, Some((201, _))), "{created:?}");
    let mut buy = json_request(
        "POST",
        "/v1/sales/drop/purchases",
        &json!({"user_id": "alice", "items": [{"sku": "s0", "quantity": 1}]}),
        false,
    );
    buy.headers_mut()
        .insert("idempotency-key", "k1".parse().unwrap());
    let bought = gateway.call(0, buy).await;
    let Some((201, body)) = bought else {
        panic!("the purchase: {bought:?}");
    };
    let order = body["order_id"].as_str().unwrap().to_owned();
    let history = history(&order);
    let limits = BTreeMap::from([("alice".to_owned(), told.limit)]);
    let remaining = BTreeMap::from([("s0".to_owned(), told.remaining)]);
    let store = world.store().unwrap();
    let now = stockade_sim::clock::epoch() + TimeDelta::seconds(told.end_s);
    let verdict = oracle::judge(&sale, &limits, &history, (&store, now), &remaining).await;
    world.stop_all().await;
    verdict.violations
}

fn named(history: &History, order: &str) {
    history.named(Named {
        user: "alice".into(),
        key: "k1".into(),
        order: order.to_owned(),
        status: 201,
        order_status: "confirmed".into(),
        at_ms: 0,
    });
}

/// Reported violations containing `what`, or a panic listing them all.
fn reported(violations: &[String], what: &str) {
    assert!(
        violations.iter().any(|v| v.contains(what)),
        "no violation says {what:?}: {violations:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_history_the_store_agrees_with_passes() {
    let violations = judged_after_one_sale(TRUE, |order| {
        let history = History::default();
        named(&history, order);
        history
    })
    .await;
    assert_eq!(violations, Vec::<String>::new());
}

/// Bob was refused with `insufficient_stock` saying `remaining` were left
/// of the sale's only SKU.
fn bob_short(order: &str, remaining: u32) -> History {
    let history = History::default();
    named(&history, order);
    history.judged(Judged {
        user: "bob".into(),
        key: String::new(),
        status: 409,
        code: "insufficient_stock".into(),
        sent_ms: 0,
        answered_ms: 0,
        instance: 0,
        at_ms: (0, 0),
        repeat: false,
        remaining: Some(remaining),
    });
    history
}

#[tokio::test(start_paused = true)]
async fn a_sale_of_one_sku_with_nothing_left_says_sold_out() {
    // Asking two with one left: short, rightly.
    let violations = judged_after_one_sale(TRUE, |order| bob_short(order, 1)).await;
    assert_eq!(violations, Vec::<String>::new());
    let violations = judged_after_one_sale(TRUE, |order| bob_short(order, 0)).await;
    reported(
        &violations,
        "buyer bob was answered insufficient_stock with 0 left",
    );
}

#[tokio::test(start_paused = true)]
async fn a_refusal_of_a_key_the_store_has_an_order_under_is_reported() {
    let violations = judged_after_one_sale(TRUE, |order| {
        let history = History::default();
        named(&history, order);
        // A repeat of the key answered as if nothing was sold.
        history.judged(Judged {
            user: "alice".into(),
            key: "k1".into(),
            status: 409,
            code: "limit_exceeded".into(),
            sent_ms: 0,
            answered_ms: 0,
            instance: 0,
            at_ms: (0, 0),
            repeat: false,
            remaining: None,
        });
        history
    })
    .await;
    reported(&violations, "alice key k1: answered 409 limit_exceeded");
}

#[tokio::test(start_paused = true)]
async fn an_order_failed_answer_for_a_committed_order_is_reported() {
    let violations = judged_after_one_sale(TRUE, |order| {
        let history = History::default();
        history.failed(order);
        history
    })
    .await;
    reported(
        &violations,
        "answered order_failed (nothing sold) but the store has it",
    );
}

#[tokio::test(start_paused = true)]
async fn a_remaining_that_does_not_add_up_is_reported() {
    let told = Told {
        remaining: 8,
        ..TRUE
    };
    let violations = judged_after_one_sale(told, |_| History::default()).await;
    reported(
        &violations,
        "SKU s0: remaining 8 + held or confirmed 1 is not its stock 10",
    );
}

#[tokio::test(start_paused = true)]
async fn a_buyer_over_their_limit_is_reported() {
    let told = Told { limit: 0, ..TRUE };
    let violations = judged_after_one_sale(told, |_| History::default()).await;
    reported(&violations, "buyer alice holds 1 items, over their limit 0");
}

#[tokio::test(start_paused = true)]
async fn an_order_named_but_never_committed_is_reported() {
    let violations = judged_after_one_sale(TRUE, |_| {
        let history = History::default();
        named(&history, "01a23179-de33-7f67-a702-ed0f18941835");
        history
    })
    .await;
    reported(&violations, "which the store never committed");
}

/// Instance 0 crashed at `at_ms` and started again a second later.
fn crash_at(at_ms: u64) -> FaultSpan {
    FaultSpan {
        from_ms: at_ms,
        to_ms: at_ms + 1_000,
        fault: Fault::Crash(0, 1_000),
    }
}

/// A pending order (202) lost by Redis and by the instance holding it, as
/// docs/consistency.md allows, is no violation; with only one of the two,
/// or for a 201, it is (seed 0x5eed03d8: a failover's old primary held
/// the outbox, and the instance crashed while the store was down).
#[tokio::test(start_paused = true)]
async fn a_pending_order_lost_by_redis_and_its_instance_is_not_reported() {
    const LOST: &str = "01a23179-de33-7f67-a702-ed0f18941835";
    let pending = |history: &History, status| {
        history.named(Named {
            user: "alice".into(),
            key: "k2".into(),
            order: LOST.into(),
            status,
            order_status: "pending".into(),
            at_ms: 1_000,
        });
    };
    let both = judged_after_one_sale(TRUE, |order| {
        let history = History::default();
        named(&history, order);
        pending(&history, 202);
        history.redis_lost_writes_now("a Redis failover");
        history.fault(crash_at(2_000));
        history
    })
    .await;
    assert_eq!(both, Vec::<String>::new());
    for (status, redis_lost, down_ms) in [(202, false, 2_000), (202, true, 500), (201, true, 2_000)]
    {
        let violations = judged_after_one_sale(TRUE, |order| {
            let history = History::default();
            named(&history, order);
            pending(&history, status);
            if redis_lost {
                history.redis_lost_writes_now("a Redis loss");
            }
            history.fault(crash_at(down_ms));
            history
        })
        .await;
        reported(&violations, "which the store never committed");
    }
}

/// The end judged with no time passed in the store: the order is still
/// held. Within its deadline that is no violation; past it and the bound,
/// it is.
#[tokio::test(start_paused = true)]
async fn a_hold_past_its_deadline_is_reported_and_one_within_it_is_not() {
    let within = Told {
        hold_seconds: Some(10),
        end_s: 10,
        ..TRUE
    };
    let violations = judged_after_one_sale(within, |_| History::default()).await;
    assert_eq!(violations, Vec::<String>::new());
    let past = Told {
        hold_seconds: Some(10),
        end_s: 12,
        ..TRUE
    };
    let violations = judged_after_one_sale(past, |_| History::default()).await;
    reported(&violations, "is still held at the end");
}

/// One order per idempotency key, as the buyer saw it: a key answered
/// with two different order ids is reported (the store's own unique index
/// keeps it from holding two, so the history is where a twin would show).
#[tokio::test(start_paused = true)]
async fn a_key_named_two_different_orders_is_reported() {
    let violations = judged_after_one_sale(TRUE, |order| {
        let history = History::default();
        named(&history, order);
        named(&history, "01a23179-de33-7f67-a702-ed0f18941835");
        history
    })
    .await;
    reported(
        &violations,
        "buyer alice key k1 was named 2 different orders",
    );
}

fn voided(history: &History, epoch: u64, reason: &str) {
    history.voided(Voided {
        order: "01a23179-de33-7f67-a702-ed0f18941835".into(),
        user: "bob".into(),
        epoch,
        reason: reason.into(),
        at_ms: 1_000,
    });
}

/// The store's arbiter refusing an order the engine accepted is the
/// engine out of line, unless a fault under the order's epoch explains
/// it; a commit of an order already refused is no disagreement.
#[tokio::test(start_paused = true)]
async fn an_order_the_store_refused_with_no_fault_to_explain_it_is_reported() {
    let disagreement = "the store refused order 01a23179-de33-7f67-a702-ed0f18941835 (oversold)";
    let violations = judged_after_one_sale(TRUE, |_| {
        let history = History::default();
        voided(&history, 1, "oversold");
        history
    })
    .await;
    reported(&violations, disagreement);
    // A failover under epoch 1 explains the refusals of epoch 1 only.
    let violations = judged_after_one_sale(TRUE, |_| {
        let history = History::default();
        history.disturbed("a Redis failover");
        voided(&history, 1, "oversold");
        history
    })
    .await;
    assert_eq!(violations, Vec::<String>::new());
    let violations = judged_after_one_sale(TRUE, |_| {
        let history = History::default();
        history.disturbed("a Redis failover");
        history.epoch(2);
        voided(&history, 2, "oversold");
        history
    })
    .await;
    reported(
        &violations,
        "the store refused order 01a23179-de33-7f67-a702-ed0f18941835 (oversold) that the engine accepted under epoch 2",
    );
    let violations = judged_after_one_sale(TRUE, |_| {
        let history = History::default();
        voided(&history, 1, "earlier");
        history
    })
    .await;
    assert_eq!(violations, Vec::<String>::new());
}

/// The service's log events reach the history: a refusal (as
/// `stockade_server::writer::log_voids` logs it), a move to the fallback
/// (which disturbs the epoch it leaves) and a rebuild.
#[tokio::test(start_paused = true)]
async fn the_services_refusals_and_moves_are_kept_from_its_log() {
    let history = History::default();
    let _capture = events::capture(&history, TrueTime::start());
    tracing::warn!(target: "stockade_server::writer", sale = "drop",
        order = "01a23179-de33-7f67-a702-ed0f18941835", user = "bob", epoch = 1u64,
        reason = "over_limit",
        "the store refused an order the engine had accepted; nothing was sold");
    tracing::warn!(target: "stockade_server::recovery::fallback", sale = "drop", epoch = 2u64,
        "no instance has reached the engine lately: the sale moves to the PostgreSQL fallback");
    tracing::info!(target: "stockade_server::recovery::rebuild", sale = "drop", epoch = 3u64,
        reason = "fallback_over", "engine rebuilt from the store");
    // Not the service's: not kept.
    tracing::warn!(target: "stockade_store", "the store refused an order the engine had accepted");
    assert_eq!(
        history.voided_orders(),
        vec![Voided {
            order: "01a23179-de33-7f67-a702-ed0f18941835".into(),
            user: "bob".into(),
            epoch: 1,
            reason: "over_limit".into(),
            at_ms: 0,
        }]
    );
    assert_eq!(
        history.disturbed_epochs(),
        BTreeMap::from([(1, "a move to the fallback".to_owned())])
    );
    let lines = history.lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[2].contains("service: engine rebuilt") && lines[2].contains("reason=fallback_over")
    );
    // Refused under epoch 1, which the move left: explained.
    assert_eq!(
        stockade_sim::agreement::engine_and_arbiter(&history),
        Vec::<String>::new()
    );
}

/// A refusal as stale is explained by two primaries serving at once, and
/// by no other fault: a failover or a Redis loss explains an engine out of
/// line (`oversold`, `over_limit`, `key_taken`), but a rebuild waits for
/// every writer before it advances the epoch, so an order left behind it
/// means the engine sold while closed (or the store let it commit).
#[test]
fn a_stale_refusal_is_explained_by_two_primaries_only() {
    let voided = |order: &str, epoch: u64, reason: &str| Voided {
        order: order.into(),
        user: "bob".into(),
        epoch,
        reason: reason.into(),
        at_ms: 0,
    };
    let history = History::default();
    history.epoch(1);
    history.redis_lost_writes_now("a Redis failover");
    history.voided(voided("a", 1, "oversold"));
    history.voided(voided("b", 1, "stale_epoch"));
    history.two_primaries(3);
    history.voided(voided("c", 3, "stale_epoch"));
    history.voided(voided("d", 3, "key_taken"));
    let violations = stockade_sim::agreement::engine_and_arbiter(&history);
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert!(
        violations[0].contains("order b (stale_epoch)"),
        "{violations:?}"
    );
}
