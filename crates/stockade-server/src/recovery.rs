//! Keeping the engine in line with the store, the source of truth.
//!
//! - At start, and whenever Redis reports a new run id (it restarted or
//!   failed over, so its data may be gone or stale), selling stops and every
//!   sale is recovered: orders left in the engine's outbox (accepted by a
//!   process that died before committing them) are committed, then the
//!   engine is compared with the store and rebuilt from it if they differ.
//! - Every second, the reconciler commits outbox entries that nobody is
//!   committing any more (older than the grace period and not in this
//!   process's queue) and retries engine releases of cancelled orders.

use std::sync::Arc;
use std::time::Duration;

use stockade_core::{EngineError, SaleSpec};
use stockade_engine::RedisEngine;

use crate::state::AppState;
use crate::store::StoreError;

/// Why recovery failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum RecoveryError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Orders were still waiting for their commit after 30 s (the store is
    /// down?): rebuilding now could forget them.
    #[error("orders are still waiting for their commit; recovery will be retried")]
    QueueNotDrained,
}

/// What recovery did to one sale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaleRecovery {
    /// The engine already agreed with the store.
    InSync,
    /// The engine was rebuilt from the store.
    Rebuilt,
}

/// Recovers one sale: commit the outbox, compare, rebuild if needed.
pub async fn recover_sale(
    state: &AppState,
    spec: &SaleSpec,
) -> Result<SaleRecovery, RecoveryError> {
    let engine = state.engine();
    let store = state.store();
    let leftovers = engine.outbox(spec.id()).await?;
    if !leftovers.is_empty() {
        tracing::info!(sale = %spec.id(), orders = leftovers.len(), "committing orders left in the outbox");
        store.commit(&leftovers).await?;
        let ids: Vec<_> = leftovers.iter().map(|o| o.id).collect();
        engine.acknowledge(spec.id(), &ids).await?;
    }
    let orders = store.all_orders(spec.id()).await?;
    let sold: u64 = orders
        .iter()
        .filter(|o| o.status.holds_stock())
        .map(|o| u64::from(o.quantity))
        .sum();
    let expected_remaining = u64::from(spec.total_stock()).saturating_sub(sold);
    let in_sync = match engine.snapshot(spec.id()).await? {
        Some(snapshot) => {
            snapshot.spec == *spec && u64::from(snapshot.remaining) == expected_remaining
        }
        None => false,
    };
    if in_sync {
        return Ok(SaleRecovery::InSync);
    }
    let snapshot = engine.rebuild(spec, &orders).await?;
    metrics::gauge!("stockade_sale_remaining", "sale" => spec.id().to_string())
        .set(f64::from(snapshot.remaining));
    tracing::info!(sale = %spec.id(), remaining = snapshot.remaining, "engine rebuilt from the store");
    Ok(SaleRecovery::Rebuilt)
}

/// Recovers every sale with selling stopped, then opens selling.
///
/// Waits for purchases in progress to answer and for the commit queue to
/// drain first: an order accepted before the fault but committed after the
/// store was read would otherwise be missing from the rebuilt engine.
pub async fn recover_all(state: &AppState, reason: &'static str) -> Result<usize, RecoveryError> {
    state.request_recovery();
    let _paused = state.pause_selling().await;
    let drained = tokio::time::timeout(Duration::from_secs(30), async {
        while state.queue().in_flight_count() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    if drained.is_err() {
        return Err(RecoveryError::QueueNotDrained);
    }
    let mut rebuilt = 0;
    for spec in state.store().sales().await? {
        if recover_sale(state, &spec).await? == SaleRecovery::Rebuilt {
            rebuilt += 1;
        }
    }
    metrics::counter!("stockade_recoveries_total", "reason" => reason).increment(1);
    state.recovered();
    Ok(rebuilt)
}

/// The reconciler: runs until the process stops.
pub async fn reconcile_forever(
    state: AppState,
    redis: Option<Arc<RedisEngine>>,
    outbox_grace: Duration,
) {
    let mut run_id = match &redis {
        Some(redis) => redis.server_run_id().await.ok(),
        None => None,
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let mut reason = "engine_lost_sale";
        if let Some(redis) = &redis {
            match redis.server_run_id().await {
                Ok(current) if run_id.as_ref() != Some(&current) => {
                    tracing::warn!(?run_id, %current, "Redis restarted or failed over: rebuilding from the store");
                    run_id = Some(current);
                    reason = "redis_restarted";
                    state.request_recovery();
                }
                Ok(_) => {}
                Err(error) => tracing::debug!(%error, "Redis unreachable"),
            }
        }
        if state.needs_recovery() {
            match recover_all(&state, reason).await {
                Ok(rebuilt) => tracing::info!(rebuilt, "recovery done, selling again"),
                Err(error) => tracing::warn!(%error, "recovery failed; retrying"),
            }
        }
        if let Err(error) = commit_stale_outbox(&state, outbox_grace).await {
            tracing::debug!(%error, "outbox sweep failed; retrying");
        }
        retry_releases(&state).await;
    }
}

/// Commits outbox entries older than the grace period that this process is
/// not committing: orders of a process that died, or whose commit failed.
async fn commit_stale_outbox(state: &AppState, grace: Duration) -> Result<(), RecoveryError> {
    let cutoff = state.clock().now() - chrono::TimeDelta::from_std(grace).unwrap_or_default();
    for spec in state.store().sales().await? {
        let stale: Vec<_> = state
            .engine()
            .outbox(spec.id())
            .await?
            .into_iter()
            .filter(|o| o.created_at < cutoff && state.queue().in_flight(o.id).is_none())
            .collect();
        if stale.is_empty() {
            continue;
        }
        tracing::info!(sale = %spec.id(), orders = stale.len(), "committing stale outbox entries");
        state.store().commit(&stale).await?;
        let ids: Vec<_> = stale.iter().map(|o| o.id).collect();
        state.engine().acknowledge(spec.id(), &ids).await?;
    }
    Ok(())
}

async fn retry_releases(state: &AppState) {
    for (sale, order) in state.releases().take() {
        if let Err(error) = state.engine().release(&sale, order).await {
            tracing::debug!(%sale, %order, %error, "release still failing; retrying");
            state.releases().push(sale, order);
        }
    }
}
