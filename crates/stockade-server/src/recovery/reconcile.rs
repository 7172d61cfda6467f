//! Start-up recovery and the reconciler's passes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use stockade_core::rule;
use stockade_core::{Engine, Order, SaleId, SaleSpec};
use stockade_engine::RedisEngine;

use crate::releases::apply_pending_releases;
use crate::sale_book::Route;
use crate::state::AppState;
use stockade_store::authority::Authority;

use super::rebuild::{commit_outbox, commit_picked};
use super::{Rebuild, RecoveryError, rebuild_sale, request_rebuild};

/// Start-up: learns every sale's route, commits what the engine's outboxes
/// hold (orders this instance accepted before it died; committing another
/// live instance's in-flight order early is harmless, a commit is
/// idempotent), and rebuilds the engine's state of the sales it does not
/// hold under the store's epoch (all of them for the in-memory engine).
/// Sales that are in line on a shared Redis are not rebuilt, so an instance
/// joining a running deployment disturbs nobody.
pub async fn recover_at_start(state: &AppState) -> Result<usize, RecoveryError> {
    let mut rebuilt = 0;
    for current in state.store().sale_states(None).await? {
        let sale = current.spec.id();
        let route = Route {
            epoch: current.epoch,
            authority: current.authority,
        };
        state.book().learn_route(sale, route);
        if !state.engine_apart() {
            continue;
        }
        let engine = state.engine();
        if current.authority == Authority::Fallback {
            continue;
        }
        if engine.epoch(sale).await? == Some(current.epoch) {
            commit_outbox(state, engine.as_ref(), sale, |_| true).await?;
            continue;
        }
        if let Rebuild::Rebuilt(_) = rebuild_sale(state, sale, current.epoch, "startup").await? {
            rebuilt += 1;
        }
    }
    // Releases owed from before the stop (a cancel answered just before
    // it): applied before the service answers, so it starts in line.
    apply_pending_releases(state, None).await;
    Ok(rebuilt)
}

/// The reconciler, and beside it the hold sweeper ([`crate::holds`]) and
/// the release applier ([`crate::releases`]):
/// runs until the process stops. `run_id` is the Redis identity read
/// before start-up recovery, so a restart in between is noticed.
pub async fn reconcile_forever(
    state: AppState,
    redis: Option<Arc<RedisEngine>>,
    run_id: Option<String>,
    outbox_grace: Duration,
) {
    // The hold sweeper, the release applier and the draws live and die
    // with the reconciler's task.
    let sweeper = crate::holds::expire_forever(state.clone());
    let applier = crate::releases::apply_forever(state.clone());
    let reporter = report_engine_view_forever(state.clone(), redis.clone());
    let draws = crate::draws::run_forever(state.clone());
    let reconciler = reconcile_loop(state, redis, run_id, outbox_grace);
    tokio::join!(sweeper, applier, reporter, draws, reconciler);
}

/// How long the engine view's ping may take before it counts as not
/// reaching the engine.
const VIEW_PING_TIMEOUT: Duration = Duration::from_millis(500);

/// Failed pings in a row after which this instance forgets its primary
/// routes (and reads them again from the store). One slow ping under load
/// is not an outage: forgetting on it sent purchases to re-read their
/// route from the store, which fails them when the store is down too.
const PINGS_BEFORE_FORGETTING: u32 = 2;

/// Reports this instance's view of the engine to the store once a second
/// (whether it reached Redis, and its writer's orders in flight), and
/// counts the live instances for the rate limiter's share, in a task
/// of its own: a reconciler pass stuck on a frozen Redis must never delay
/// the report that a move to the fallback waits for.
async fn report_engine_view_forever(state: AppState, redis: Option<Arc<RedisEngine>>) {
    let Some(redis) = redis else {
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks = 0u64;
    let mut failed_in_a_row = 0u32;
    loop {
        tick.tick().await;
        let reached = matches!(
            tokio::time::timeout(VIEW_PING_TIMEOUT, redis.server_run_id()).await,
            Ok(Ok(_))
        );
        failed_in_a_row = if reached { 0 } else { failed_in_a_row + 1 };
        if failed_in_a_row >= PINGS_BEFORE_FORGETTING {
            state.book().forget_primaries();
        }
        ticks += 1;
        if ticks % 3_600 == 60
            && let Err(error) = state.store().prune_engine_views().await
        {
            tracing::debug!(%error, "cannot prune old engine views; later");
        }
        if let Err(error) = state
            .store()
            .report_engine_view(state.book().instance(), reached, || {
                state.queue().in_flight_report()
            })
            .await
        {
            tracing::warn!(%error, "cannot record this instance's view of the engine; retrying");
            continue;
        }
        // The live instances share the rate limits: each one's share for
        // when Redis does not answer follows them, not a number set by hand.
        match state.store().live_instances(super::FALLBACK_LIVE).await {
            Ok(live) => state
                .rate_limiter()
                .set_instances(u32::try_from(live).unwrap_or(u32::MAX)),
            Err(error) => tracing::debug!(%error, "cannot count the live instances; later"),
        }
    }
}

/// The reconciler's own loop: every second.
async fn reconcile_loop(
    state: AppState,
    redis: Option<Arc<RedisEngine>>,
    mut run_id: Option<String>,
    outbox_grace: Duration,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = Seen::default();
    let mut healthy_ticks = 0u32;
    // A restart seen is owed a rebuild of every open sale until a pass has
    // made it: a pass that fails (the store is down) must not forget it, or
    // the sales Redis lost wait for a purchase to find them, and a Redis
    // back from an old snapshot serves its stale stock until drift is seen.
    let mut restart_owed = false;
    metrics::gauge!("stockade_outbox_grace_seconds").set(outbox_grace.as_secs_f64());
    loop {
        tick.tick().await;
        if let Some(redis) = &redis {
            match redis.server_run_id().await {
                Ok(current) => {
                    healthy_ticks += 1;
                    if run_id.as_ref() != Some(&current) {
                        tracing::warn!(?run_id, %current,
                            "Redis restarted or failed over: rebuilding the open sales from the store");
                        restart_owed |= run_id.is_some();
                        run_id = Some(current);
                    }
                }
                Err(error) => {
                    // The engine-view reporter forgets the primary routes.
                    healthy_ticks = 0;
                    tracing::warn!(%error, "Redis unreachable");
                }
            }
        }
        match reconcile_once(
            &state,
            restart_owed.then_some(run_id.as_deref()).flatten(),
            healthy_ticks >= 2,
            outbox_grace,
            &mut seen,
        )
        .await
        {
            Ok(()) => restart_owed = false,
            Err(error) => tracing::warn!(%error, restart_owed, "reconciliation failed; retrying"),
        }
    }
}

/// What the reconciler carries from one pass to the next.
#[derive(Debug, Default)]
struct Seen {
    /// Sales whose engine offered more than the store had left, and how
    /// many passes in a row.
    drift: HashMap<SaleId, u32>,
    /// The sales of the last pass, whose outboxes are still measured while
    /// the store cannot list them.
    sales: Vec<SaleId>,
    /// Sales found settled: sold out in the store and in the engine, with
    /// an empty outbox. Looked at only every [`QUIET_EVERY`] passes while
    /// the store still says sold out (a cancel makes them busy again).
    quiet: std::collections::HashSet<SaleId>,
    /// Passes so far.
    passes: u64,
}

/// A settled sale is looked at once in this many passes.
const QUIET_EVERY: u64 = 30;

/// Sets `stockade_outbox_oldest_entry_seconds` from the oldest entry left.
fn report_oldest_entry(
    now: chrono::DateTime<chrono::Utc>,
    oldest: Option<chrono::DateTime<chrono::Utc>>,
) {
    let age = oldest.map_or(0.0, |at| (now - at).as_seconds_f64().max(0.0));
    metrics::gauge!("stockade_outbox_oldest_entry_seconds").set(age);
}

/// Measures the outboxes of `sales` without committing anything (the store
/// is failing).
async fn measure_outboxes(state: &AppState, engine: &dyn Engine, sales: &[SaleId]) {
    let mut oldest = None;
    for sale in sales {
        if let Ok(entries) = engine.outbox(sale).await {
            oldest = entries.iter().map(|o| o.created_at).chain(oldest).min();
        }
    }
    report_oldest_entry(state.clock().now(), oldest);
}

/// One pass over the open sales; `restarted_to`: the run id of the Redis
/// that restarted or took over, while its rebuilds are owed.
async fn reconcile_once(
    state: &AppState,
    restarted_to: Option<&str>,
    engine_healthy: bool,
    grace: Duration,
    seen_before: &mut Seen,
) -> Result<(), RecoveryError> {
    if !state.engine_apart() {
        return Ok(());
    }
    let engine = state.engine();
    let now = state.clock().now();
    // Orders accepted just before a sale ended may still be in an outbox.
    let margin = chrono::TimeDelta::from_std(grace * 10).unwrap_or_default();
    let sales = match state.store().sale_states(Some(now - margin)).await {
        Ok(sales) => sales,
        Err(error) => {
            measure_outboxes(state, engine.as_ref(), &seen_before.sales).await;
            return Err(error.into());
        }
    };
    seen_before.sales = sales.iter().map(|s| s.spec.id().clone()).collect();
    let drift = &mut seen_before.drift;
    let mut oldest_entry = None;
    let mut drifting = 0u32;
    seen_before.passes += 1;
    let quiet_pass = seen_before.passes.is_multiple_of(QUIET_EVERY);
    let quiet = &mut seen_before.quiet;
    quiet.retain(|sale| seen_before.sales.contains(sale));
    for current in sales {
        let sale = current.spec.id();
        // Nothing owed on a settled sale: no need to read Redis every second.
        if current.remaining() == 0 && quiet.contains(sale) && !quiet_pass && restarted_to.is_none()
        {
            continue;
        }
        quiet.remove(sale);
        let seen = state
            .book()
            .route(sale)
            .map_or(current.epoch, |r| r.epoch.min(current.epoch));
        if current.authority == Authority::Fallback {
            if engine_healthy {
                request_rebuild(state, sale, current.epoch, "fallback_over");
            }
            continue;
        }
        if let Some(server) = restarted_to {
            // A sale this instance already rebuilt on the new server (a
            // purchase met the loss first) is in line: only pause it again
            // if it was not.
            if !state.book().was_rebuilt_on(sale, server) {
                request_rebuild(state, sale, seen, "redis_restarted");
            }
            continue;
        }
        if state.book().is_rebuilding(sale) {
            continue;
        }
        // Outbox entries older than the grace period that this process is
        // not committing: orders of a process that died, or whose commit
        // failed.
        let cutoff = now - chrono::TimeDelta::from_std(grace).unwrap_or_default();
        let stale = |o: &Order| o.created_at < cutoff && state.queue().in_flight(o.id).is_none();
        // Read before the outbox, and the store again after it when the
        // engine looks behind: every order the engine had decided by this
        // reading is then either in the outbox read or already committed in
        // the store read, so a busy sale never looks behind by a race.
        let snapshot = engine.snapshot(sale).await?;
        // Items the engine counts as sold that the store may not have yet,
        // in all and of each SKU (by its position in the spec).
        let mut in_outbox: Option<u64> = None;
        let mut owed: Option<Vec<u64>> = None;
        match engine.outbox(sale).await {
            Ok(entries) => {
                in_outbox = Some(entries.iter().map(|o| u64::from(o.quantity)).sum());
                owed = Some(owed_per_sku(&current.spec, &entries));
                let (picked, left): (Vec<Order>, Vec<Order>) =
                    entries.into_iter().partition(|o| stale(o));
                // What stays in the outbox: the entries left, and the
                // picked ones too if their commit fails.
                let mut remaining = left.iter().map(|o| o.created_at).min();
                let picked_oldest = picked.iter().map(|o| o.created_at).min();
                if let Err(error) = commit_picked(state, engine.as_ref(), sale, picked).await {
                    remaining = remaining.into_iter().chain(picked_oldest).min();
                    tracing::warn!(%sale, %error, "committing stale outbox entries failed; retrying");
                }
                oldest_entry = oldest_entry.into_iter().chain(remaining).min();
            }
            Err(error) => {
                tracing::warn!(%sale, %error, "reading the outbox failed; retrying")
            }
        }
        // The engine must never offer more than the store has left, nor
        // less than the store has left minus what its outbox holds (orders
        // the store may not have yet) and what the store took back that
        // the release applier has not given it yet. Seen twice in a row (a
        // single reading can race a cancel or a commit), it is out of line: a Redis
        // restored from an old snapshot, or left over from an earlier store.
        // (A sale the engine lost is found by the next purchase or read.)
        if let Some(snapshot) = snapshot {
            if current.spec.ends_at().is_none_or(|end| end > now) {
                // Keeps an open sale's series alive; an ended sale's are
                // dropped once idle for the metrics retention.
                crate::metrics::record_remaining(&snapshot);
            }
            // Judged per SKU: a bundle's items come from several.
            let engine_left: Vec<u32> = snapshot.skus.iter().map(|sku| sku.remaining).collect();
            let mut store_left = current.sku_remaining();
            let ahead = engine_left.iter().zip(&store_left).any(|(e, s)| e > s);
            let short_of = |left: &[u32], owed: &Option<Vec<u64>>| {
                owed.as_ref().is_some_and(|owed| {
                    engine_left
                        .iter()
                        .zip(left)
                        .zip(owed)
                        .any(|((e, l), o)| u64::from(*e) + o < u64::from(*l))
                })
            };
            let mut behind = short_of(&store_left, &owed);
            if behind && let Some(fresh) = state.store().sale_state(sale).await? {
                store_left = fresh.sku_remaining();
                // Items the store took back (a cancel, an expired hold)
                // that the release applier has not given the engine yet.
                if let Some(owed) = owed.as_mut() {
                    for (i, items) in owed_releases(state, &current.spec, sale)
                        .await?
                        .iter()
                        .enumerate()
                    {
                        owed[i] += items;
                    }
                }
                behind = short_of(&store_left, &owed);
            }
            if ahead || behind {
                drifting += 1;
                let count = drift.entry(sale.clone()).or_default();
                *count += 1;
                if *count >= 2 {
                    tracing::warn!(%sale, engine = ?engine_left, store = ?store_left, owed = ?owed,
                        ahead, "the engine's stock is out of line with the store's: rebuilding");
                    drift.remove(sale);
                    request_rebuild(state, sale, seen, "drift");
                }
            } else {
                drift.remove(sale);
                if store_left.iter().all(|left| *left == 0)
                    && snapshot.remaining == 0
                    && in_outbox == Some(0)
                {
                    quiet.insert(sale.clone());
                }
            }
        }
    }
    report_oldest_entry(now, oldest_entry);
    metrics::gauge!("stockade_engine_store_drift_sales").set(f64::from(drifting));
    Ok(())
}

/// The items of each SKU of `spec` that the store took back and the engine
/// is owed (pending releases, up to the applier's batch).
async fn owed_releases(
    state: &AppState,
    spec: &SaleSpec,
    sale: &SaleId,
) -> Result<Vec<u64>, RecoveryError> {
    let mut orders = Vec::new();
    for release in state
        .store()
        .pending_releases_of(sale, crate::releases::BATCH)
        .await?
    {
        orders.extend(state.store().order(release.order_id).await?);
    }
    Ok(owed_per_sku(spec, &orders))
}

/// The items `orders` hold of each SKU of `spec` (by position); an item of
/// a SKU the spec does not have counts nowhere (the store will void it).
fn owed_per_sku(spec: &SaleSpec, orders: &[Order]) -> Vec<u64> {
    let mut owed = vec![0u64; spec.skus().len()];
    for order in orders {
        for (i, quantity) in rule::resolve_order(spec, &order.items).unwrap_or_default() {
            owed[i] += u64::from(quantity);
        }
    }
    owed
}
