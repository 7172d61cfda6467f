//! Rebuilding a sale's engine state from the store, under its lock.

use backon::{ExponentialBuilder, Retryable};
use std::time::Duration;

use stockade_core::sale::Window;
use stockade_core::{Engine, EngineError, Epoch, Order, SaleId};
use stockade_lock::Lease;

use crate::releases::apply_pending_releases;
use crate::sale_book::Route;
use crate::state::AppState;
use stockade_store::authority::{Advance, Authority};

use super::{Rebuild, RecoveryError};

/// How long an instance waits for another's rebuild of the same sale.
const LOCK_WAIT: Duration = Duration::from_secs(15);

fn lock_name(sale: &SaleId) -> String {
    format!("rebuild:{sale}")
}

/// Rebuilds the engine's state for `sale` from the store, unless the store
/// has moved past `seen` (the epoch under which the trouble was seen) and
/// the engine already holds the new epoch.
pub async fn rebuild_sale(
    state: &AppState,
    sale: &SaleId,
    seen: Epoch,
    reason: &'static str,
) -> Result<Rebuild, RecoveryError> {
    if !state.engine_apart() {
        return Ok(Rebuild::Nothing);
    }
    let engine = state.engine();
    let guard = match state.locks() {
        Some(locks) => Some(
            locks
                .lock_with(&lock_name(sale), LOCK_WAIT, Lease::Watchdog)
                .await?,
        ),
        None => None,
    };
    let result = rebuild_locked(state, engine.as_ref(), sale, seen, reason).await;
    if let Some(guard) = guard
        && let Err(error) = guard.release().await
    {
        tracing::warn!(%sale, %error, "could not release the rebuild lock; its lease will run out");
    }
    result
}

async fn rebuild_locked(
    state: &AppState,
    engine: &dyn Engine,
    sale: &SaleId,
    seen: Epoch,
    reason: &'static str,
) -> Result<Rebuild, RecoveryError> {
    let store = state.store();
    let Some(current) = store.sale_state(sale).await? else {
        return Ok(Rebuild::Nothing);
    };
    let held = engine.epoch(sale).await?;
    // An ended sale the engine let go (see `retirement`) is not brought
    // back: it sells nothing, and its orders are in the store.
    if held.is_none() && current.spec.window_at(state.clock().now()) == Window::Ended {
        return Ok(Rebuild::Nothing);
    }
    // Another instance advanced the epoch after the trouble was seen: it
    // has rebuilt the engine, or is rebuilding it now. Wait for that
    // rather than close the engine under it: under Sentinel or Cluster
    // there is no rebuild lock, instances rebuild side by side, and a late
    // close started a new rebuild (and its wait for the writers) each time.
    if current.epoch > seen
        && current.authority == Authority::Primary
        && (held == Some(current.epoch)
            || engine_reaches(engine, sale, current.epoch, TAKEOVER_WAIT).await?)
    {
        state.book().learn_route(
            sale,
            Route {
                epoch: current.epoch,
                authority: current.authority,
            },
        );
        return Ok(Rebuild::InLine);
    }
    // Stop the engine selling, then commit what it accepted: after the
    // close its outbox is final, and every entry decided under the current
    // epoch commits (other instances' in-flight orders included), as does
    // every order still in a live instance's writer.
    engine.close(sale).await?;
    commit_outbox(state, engine, sale, |_| true).await?;
    // What the outbox lacked (an engine that lost its data) lives only in
    // the writers that took it, maybe named to buyers already.
    super::drain::wait_for_writers(state, sale).await?;
    let epoch = match store
        .advance_epoch(sale, current.epoch, Authority::Primary)
        .await?
    {
        Advance::Advanced(epoch) => epoch,
        Advance::Moved { .. } => return Err(RecoveryError::Raced(sale.clone())),
        Advance::UnknownSale => return Ok(Rebuild::Nothing),
    };
    let orders = store.all_orders(sale).await?;
    // Read before the rebuild writes: a server that changes after this
    // read has a new run id, which the reconciler rebuilds for.
    let server = engine.run_id().await.ok().flatten();
    let snapshot = match engine.rebuild(&current.spec, epoch, &orders).await {
        Ok(snapshot) => snapshot,
        Err(EngineError::Superseded { newer, .. }) => {
            tracing::info!(%sale, %epoch, %newer, "rebuild superseded by a newer one");
            return Ok(Rebuild::Superseded);
        }
        Err(error) => return Err(error.into()),
    };
    state.book().learn_route(
        sale,
        Route {
            epoch,
            authority: Authority::Primary,
        },
    );
    if let Some(server) = server {
        state.book().rebuilt_on(sale, server);
    }
    apply_pending_releases(state, Some(sale)).await;
    // The engine now offers what the store has left, which may be more
    // than it offered before.
    state.stock_returned(sale);
    // The engine just took a whole rebuild: it is reachable, whatever the
    // breaker last saw (else the next purchase would move the sale straight
    // back to the fallback).
    state.breaker().succeeded();
    metrics::counter!("stockade_rebuilds_total", "reason" => reason).increment(1);
    metrics::gauge!("stockade_sale_remaining", "sale" => sale.to_string())
        .set(f64::from(snapshot.remaining));
    tracing::info!(%sale, %epoch, reason, remaining = snapshot.remaining, orders = orders.len(),
        "engine rebuilt from the store");
    Ok(Rebuild::Rebuilt(epoch))
}

/// How long a rebuilder waits for another instance's rebuild under a newer
/// epoch to finish before taking over (that instance may have died).
const TAKEOVER_WAIT: Duration = Duration::from_secs(5);

/// Whether the engine holds the sale under `epoch` (or a newer one)
/// within `wait`.
async fn engine_reaches(
    engine: &dyn Engine,
    sale: &SaleId,
    epoch: Epoch,
    wait: Duration,
) -> Result<bool, RecoveryError> {
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if engine.epoch(sale).await?.is_some_and(|held| held >= epoch) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Commits the orders of the sale's outbox that `pick` selects (the store
/// judges each one) and removes them from the outbox.
pub(super) async fn commit_outbox(
    state: &AppState,
    engine: &dyn Engine,
    sale: &SaleId,
    pick: impl Fn(&Order) -> bool,
) -> Result<(), RecoveryError> {
    let picked: Vec<Order> = engine
        .outbox(sale)
        .await?
        .into_iter()
        .filter(|o| pick(o))
        .collect();
    commit_picked(state, engine, sale, picked).await
}

/// Commits `picked` (entries of the sale's outbox) and removes them from
/// the outbox.
pub(super) async fn commit_picked(
    state: &AppState,
    engine: &dyn Engine,
    sale: &SaleId,
    picked: Vec<Order>,
) -> Result<(), RecoveryError> {
    if picked.is_empty() {
        return Ok(());
    }
    let verdicts = state.store().commit(&picked).await?;
    crate::writer::log_voids(&picked, &verdicts);
    let ids: Vec<_> = picked.iter().map(|o| o.id).collect();
    engine.acknowledge(sale, &ids).await?;
    tracing::info!(%sale, orders = ids.len(), "committed orders left in the outbox");
    Ok(())
}

/// Rebuilds `sale` in the background (at most one rebuild per sale per
/// instance at a time), retrying with a growing pause until it succeeds or
/// the sale is in line; this instance answers its purchases 503
/// `rebuilding` meanwhile.
pub fn request_rebuild(state: &AppState, sale: &SaleId, seen: Epoch, reason: &'static str) {
    if !state.engine_apart() || !state.book().start_rebuild(sale) {
        return;
    }
    let state = state.clone();
    let sale = sale.clone();
    crate::tasks::spawn(async move {
        if !state.is_stopping() {
            let _rebuilt = (|| rebuild_sale(&state, &sale, seen, reason))
                .retry(
                    ExponentialBuilder::default()
                        .with_min_delay(Duration::from_millis(100))
                        .with_max_delay(Duration::from_secs(2))
                        .without_max_times(),
                )
                .when(|_| !state.is_stopping())
                .notify(|error, _| {
                    if error.means_unreachable() {
                        // Purchases of the sale may then go to the fallback
                        // rather than wait for this rebuild.
                        state.breaker().failed(tokio::time::Instant::now());
                        state.book().forget_primaries();
                    }
                    metrics::counter!("stockade_rebuild_failures_total").increment(1);
                    tracing::warn!(%sale, reason, %error, "rebuilding the sale failed; retrying");
                })
                .await;
        }
        state.book().end_rebuild(&sale);
    });
}
