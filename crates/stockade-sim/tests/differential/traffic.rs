//! The project's own Redis traffic, recorded on a SimRedis and replayed
//! to a fresh SimRedis and a real server, every reply compared: the
//! engine (its Functions library: a sale, buyers until sold out, a
//! release, the outbox, a rebuild), and the service's waiting room and
//! shared rate limits (their libraries, through the same connection).
//! A replica of the recording server is checked to hold the same data.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use stockade_core::{
    Engine, Epoch, ManualClock, Purchase, PurchaseOutcome, SaleId, SaleSpec, UserId,
};
use stockade_engine::{RedisEngine, RedisEngineConfig};
use stockade_server::rate_limit::{Limit, RateLimiter, RateLimits};
use stockade_server::waiting_room::redis::RedisQueues;
use stockade_server::waiting_room::rooms::next_place;
use stockade_server::waiting_room::token::AdmissionSigner;
use stockade_server::waiting_room::{QueueBackend, RoomConfig, Tick};
use stockade_sim::redis::SimRedis;

use crate::both;

/// A recording server, and the engine on it.
async fn recorder(clock: &ManualClock) -> (SimRedis, RedisEngine) {
    let recorder = SimRedis::new("recorder", Arc::new(clock.clone()));
    recorder.record(true);
    let engine = RedisEngine::connect(
        &RedisEngineConfig::connected(Arc::new(recorder.clone())),
        Arc::new(clock.clone()),
    )
    .await
    .expect("the engine connects to the simulated redis");
    (recorder, engine)
}

/// Replays what `recorder` received to a fresh SimRedis and a real
/// server, comparing every reply, then the keyspaces.
async fn replay(recorder: &SimRedis, clock: &ManualClock, what: &str) {
    let traffic = recorder.recorded();
    assert!(
        traffic.iter().any(|c| c[0].eq_ignore_ascii_case(b"FCALL")),
        "{what}: a library ran"
    );
    // A replica fed the recorder's write effects holds what it holds:
    // every write of the project's scripts replicates.
    assert!(
        recorder.replica_lagging(0).dump() == recorder.dump(),
        "{what}: a replica differs from its primary"
    );
    let mut pair = both(&SimRedis::new("replay", Arc::new(clock.clone()))).await;
    for (step, args) in traffic.iter().enumerate() {
        // Who the server is (INFO) and client bookkeeping differ by design.
        if args[0].eq_ignore_ascii_case(b"INFO") || args[0].eq_ignore_ascii_case(b"CLIENT") {
            continue;
        }
        pair.same(args, true, &format!("{what}, step {step}")).await;
    }
    pair.same_keyspace(true, &format!("after {what}")).await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_engine_library_answers_as_on_redis() {
    let clock = ManualClock::new(Utc::now());
    let (recorder, engine) = recorder(&clock).await;
    let spec = SaleSpec::builder("diff", 4).unwrap().build().unwrap();
    engine.create_sale(&spec).await.unwrap();
    let mut first = None;
    for user in 0..6 {
        let outcome = engine
            .purchase(&Purchase::new("diff", format!("u{user}"), 1).unwrap())
            .await
            .unwrap();
        if let PurchaseOutcome::Purchased { order_id, .. } = outcome {
            first.get_or_insert(order_id);
        }
    }
    let first = first.expect("someone bought");
    engine
        .release(spec.id(), first, Epoch::FIRST)
        .await
        .unwrap();
    let outcome = engine
        .purchase(&Purchase::new("diff", "late", 1).unwrap())
        .await
        .unwrap();
    assert!(
        matches!(outcome, PurchaseOutcome::Purchased { remaining: 0, .. }),
        "{outcome:?}"
    );
    let orders = engine.outbox(spec.id()).await.unwrap();
    engine.rebuild(&spec, Epoch::FIRST, &orders).await.unwrap();
    engine.snapshot(spec.id()).await.unwrap();
    replay(&recorder, &clock, "the engine's traffic").await;
}

#[tokio::test(flavor = "current_thread")]
async fn the_waiting_room_and_rate_limits_answer_as_on_redis() {
    let t0 = 1_800_000_000_000;
    let clock = ManualClock::new(Utc.timestamp_millis_opt(t0).unwrap());
    let (recorder, engine) = recorder(&clock).await;

    // The waiting room: joins, admissions by ticks, an admission reserved,
    // spent and consumed, a sold-out tick, the room forgotten.
    let queues = RedisQueues::new(engine.connection(), "test:wr:");
    let sale = SaleId::new("queued").unwrap();
    let signer = AdmissionSigner::new(b"the differential's secret.......");
    let config = RoomConfig::new(2, Duration::from_secs(60), 1_500).unwrap();
    let tick = |now_ms: i64, remaining: u32| Tick {
        now_ms,
        started: true,
        ended: false,
        remaining,
        sold_out: remaining == 0,
        used_before: u64::MAX,
        expired_before_ms: now_ms,
        config,
    };
    queues.register(&sale).await.unwrap();
    let mut tickets = Vec::new();
    for who in 0..5 {
        let buyer = UserId::new(format!("buyer|{who}")).unwrap();
        let prequeue = who < 2;
        let place = if prequeue {
            1_000 + who
        } else {
            next_place(t0)
        };
        let ticket = signer.mint_ticket(&sale, place, &buyer);
        queues.join(&ticket, t0, prequeue).await.unwrap();
        // A second join of the same buyer answers the live ticket.
        queues.join(&ticket, t0, prequeue).await.unwrap();
        tickets.push(ticket);
    }
    queues.tick(&sale, &tick(t0 + 1_000, 3)).await.unwrap();
    for ticket in &tickets {
        queues.ticket(ticket, t0 + 1_000, false).await.unwrap();
    }
    let first = &tickets[0];
    queues
        .reserve_admission(first, "held-1", t0 + 30_000, t0 + 1_000)
        .await
        .unwrap();
    queues
        .reserve_admission(first, "held-2", t0 + 30_000, t0 + 1_001)
        .await
        .unwrap();
    queues
        .settle_admission(first, "held-1", Some("order-1"))
        .await
        .unwrap();
    queues.consume(first).await.unwrap();
    queues.used(&sale).await.unwrap();
    queues.tick(&sale, &tick(t0 + 5_000, 0)).await.unwrap();
    queues.ticket(&tickets[4], t0 + 5_000, true).await.unwrap();
    queues.rooms().await.unwrap();
    queues
        .forget(&sale, Duration::from_secs(600))
        .await
        .unwrap();
    queues.retire(&sale).await.unwrap();

    // The shared rate limits: a buyer's burst, refused past it, let in
    // again once time passed.
    let limits = RateLimits {
        buyer: Some(Limit::parse("3/m", None).unwrap()),
        ..RateLimits::default()
    };
    let limiter = RateLimiter::shared(
        limits,
        engine.connection(),
        "test:limit:".into(),
        Arc::new(clock.clone()),
    );
    let buyer = UserId::new("limited").unwrap();
    let mut refused = 0;
    for _ in 0..5 {
        refused += usize::from(limiter.check_buyer(&buyer).await.is_err());
    }
    clock.advance(chrono::TimeDelta::seconds(30));
    limiter.check_buyer(&buyer).await.unwrap();
    assert!(refused > 0, "the limit refused some of the burst");

    replay(
        &recorder,
        &clock,
        "the waiting room's and the limiter's traffic",
    )
    .await;
}
