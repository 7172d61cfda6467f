//! Orders whose batch failed, committed again from memory until the store
//! takes them.

use crate::in_flight::InFlight;
use std::sync::Arc;
use std::time::Duration;
use stockade_core::Order;
use stockade_store::OrderStore;
use tokio::sync::mpsc;

use super::{Acknowledger, log_voids};

/// Commits the orders whose batch failed, again and again with a growing
/// pause (250 ms to 2 s), until the store takes them (committed, or void:
/// either way decided) and the engine is told. Ends when the writer stops,
/// after one last try: orders still stranded then stay in the engine's
/// outbox, for this instance's next start or another instance's
/// reconciler.
pub(super) async fn recommit_stranded(
    mut arriving: mpsc::UnboundedReceiver<Vec<Order>>,
    store: OrderStore,
    acknowledger: Option<Acknowledger>,
    in_flight: Arc<InFlight>,
    max_batch: usize,
) {
    const FIRST_PAUSE: Duration = Duration::from_millis(250);
    let mut stranded: Vec<Order> = Vec::new();
    let mut pause = FIRST_PAUSE;
    let mut stopping = false;
    loop {
        if stranded.is_empty() {
            match arriving.recv().await {
                Some(orders) => stranded.extend(orders),
                None => return,
            }
            pause = FIRST_PAUSE;
        }
        if !stopping {
            // Let the store come back; gather what else fails meanwhile.
            let wake = tokio::time::sleep(pause);
            tokio::pin!(wake);
            loop {
                tokio::select! {
                    // In order, so a run is the same each time (the simulator's replays).
                    biased;
                    () = &mut wake => break,
                    more = arriving.recv() => match more {
                        Some(orders) => stranded.extend(orders),
                        None => {
                            stopping = true;
                            break;
                        }
                    },
                }
            }
        }
        let mut still = Vec::new();
        for chunk in stranded.chunks(max_batch) {
            match store.commit(chunk).await {
                Ok(verdicts) => {
                    log_voids(chunk, &verdicts);
                    if let Some(acknowledger) = &acknowledger {
                        acknowledger.acknowledge(chunk);
                    }
                    for order in chunk {
                        in_flight.remove(&order.id);
                    }
                }
                Err(_) => still.extend_from_slice(chunk),
            }
        }
        if !still.is_empty() && still.len() < stranded.len() {
            pause = FIRST_PAUSE;
        } else {
            pause = (pause * 2).min(Duration::from_secs(2));
        }
        if stranded.len() != still.len() {
            tracing::info!(
                committed = stranded.len() - still.len(),
                left = still.len(),
                "stranded orders committed"
            );
        }
        stranded = still;
        if stopping {
            for order in &stranded {
                in_flight.remove(&order.id);
            }
            if !stranded.is_empty() {
                tracing::warn!(
                    orders = stranded.len(),
                    "stopping with orders the store never took: they stay in the engine's outbox"
                );
            }
            return;
        }
    }
}
