//! Moving stock between the shards of one sale.
//!
//! The shards live on different slots, so no script sees two of them: a
//! transfer is two steps. `take.lua` takes items from the giving shard and
//! records them there (`xout:<id>`, with Redis's time); `give.lua` adds
//! them to the receiving shard once (`xin:<id>` marks it). Then the record
//! goes. Stock is never lost in between and never given twice:
//!
//! - a giver that dies after taking leaves the record: the background pass
//!   of any process gives it after [`STALE`];
//! - a giver that stalls past [`HORIZON`] cannot give any more (give.lua
//!   refuses a transfer taken longer ago), so once that is past, the
//!   background pass puts the items back where they came from
//!   (`untake.lua`) if nobody gave them;
//! - a rebuild under a new epoch replaces every shard's state, records
//!   included, and give.lua refuses a transfer of an older epoch.
//!
//! On demand ([`Transfers::refill`]): a purchase that finds its shard short
//! pulls from every sibling at once (each gives at least what is wanted,
//! or half of what it has if more), then tries again. One pull per shard
//! is in flight per process; purchases that failed before it ended try
//! again on its result instead of pulling themselves.
//!
//! In the background ([`spawn_rebalancer`]): every [`PASS`], for each
//! sharded sale sold from in the last [`ACTIVE`], stale transfers are
//! finished and the poorest shard, once under a quarter of the average,
//! gets stock from the richest, so shards run dry together.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;
// tokio's: the wall clock in the service, the simulated one in the simulator.
use tokio::time::Instant;

use dashmap::DashMap;
use stockade_core::{EngineError, Epoch, OrderId, SaleId};
use tokio::sync::Mutex;

use super::super::SharedConnection;
use super::super::scripts::{GIVE, TAKE, UNTAKE, redis_error};
use super::{Layout, Layouts};

/// How long a transfer's record may stand before the background pass
/// finishes it.
const STALE: Duration = Duration::from_secs(5);
/// How long after its take a transfer may still be given.
const HORIZON: Duration = Duration::from_secs(60);
/// How often the background pass runs.
const PASS: Duration = Duration::from_millis(250);
/// How many times a pull that brought nothing is tried again while the
/// sale still has stock somewhere (in flight between other shards).
const DRY_CHECKS: usize = 20;
/// How recently a sale must have been sold from to be leveled.
const ACTIVE: Duration = Duration::from_secs(30);

/// The last pull of one shard in this process.
#[derive(Default)]
struct Pull {
    /// When a pull last brought stock.
    filled_at: Option<Instant>,
    /// When a pull last found every sibling empty.
    dry_at: Option<Instant>,
}

/// Moves stock between shards.
pub(in crate::redis) struct Transfers {
    connection: SharedConnection,
    pulls: DashMap<(SaleId, u16), Arc<Mutex<Pull>>>,
}

impl Transfers {
    pub(in crate::redis) fn new(connection: SharedConnection) -> Self {
        Self {
            connection,
            pulls: DashMap::new(),
        }
    }

    /// Shard `to` of `sale` could not sell `need` items to a purchase tried
    /// at `tried_at`: pulls stock from its siblings. True if the purchase
    /// should be tried again (stock came, by this pull or one that ended
    /// after the try), false if every sibling was found empty since.
    pub(in crate::redis) async fn refill(
        &self,
        sale: &SaleId,
        layout: &Layout,
        to: u16,
        epoch: Epoch,
        need: u32,
        tried_at: Instant,
    ) -> Result<bool, EngineError> {
        let cell = Arc::clone(self.pulls.entry((sale.clone(), to)).or_default().value());
        let mut pull = cell.lock().await;
        if pull.filled_at.is_some_and(|at| at > tried_at) {
            return Ok(true);
        }
        if pull.dry_at.is_some_and(|at| at > tried_at) {
            return Ok(false);
        }
        // Siblings found empty may be so only for a moment: another shard's
        // pull took their stock and has not given it yet, or gave it to a
        // shard already asked. So "dry" needs every shard empty and nothing
        // in flight, read after the pull; while stock is anywhere, pull
        // again.
        for _ in 0..DRY_CHECKS {
            let got = self.pull(layout, to, epoch, need).await?;
            if got > 0 {
                pull.filled_at = Some(Instant::now());
                return Ok(true);
            }
            let hashes = super::hashes(&self.connection, layout).await?;
            let own = hashes[usize::from(to)]
                .get("remaining")
                .and_then(|r| r.parse::<u64>().ok())
                .unwrap_or(0);
            if own > 0 {
                pull.filled_at = Some(Instant::now());
                return Ok(true);
            }
            if super::remaining_of(&hashes)? == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        pull.dry_at = Some(Instant::now());
        Ok(false)
    }

    /// Takes from every sibling of shard `to` at once (at least `need`, or
    /// half of what each has) and gives it to `to`. Returns the items given.
    async fn pull(
        &self,
        layout: &Layout,
        to: u16,
        epoch: Epoch,
        need: u32,
    ) -> Result<u32, EngineError> {
        let siblings = (0..layout.len()).filter(|&from| from != to);
        let moved = futures::future::join_all(
            siblings.map(|from| self.transfer(layout, from, to, epoch, need, 2)),
        )
        .await;
        let mut got = 0;
        let mut failure = None;
        for result in moved {
            match result {
                Ok(items) => got += items,
                Err(error) => failure = Some(error),
            }
        }
        match failure {
            Some(error) if got == 0 => Err(error),
            _ => Ok(got),
        }
    }

    /// Moves at least `at_least` items (or `1/divisor` of what the giver
    /// has, if more; no more than it has) from shard `from` to shard `to`.
    /// Returns the items given.
    async fn transfer(
        &self,
        layout: &Layout,
        from: u16,
        to: u16,
        epoch: Epoch,
        at_least: u32,
        divisor: u32,
    ) -> Result<u32, EngineError> {
        let id = OrderId::generate().to_string();
        let mut take = TAKE.prepare_invoke();
        take.key(&layout.keys(from).sale)
            .arg(epoch.get())
            .arg(&id)
            .arg(to)
            .arg(at_least)
            .arg(divisor);
        let (ok, taken, at): (i64, i64, i64) = take
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        if ok != 1 || taken <= 0 {
            return Ok(0);
        }
        let given = self.give(layout, from, to, epoch, &id, taken, at).await?;
        Ok(if given { taken as u32 } else { 0 })
    }

    /// give.lua, then the record's removal. True if the items were given
    /// (now or before); false if they stay recorded in the giver (the
    /// receiver is under another epoch) or were put back (too old).
    #[allow(clippy::too_many_arguments)]
    async fn give(
        &self,
        layout: &Layout,
        from: u16,
        to: u16,
        epoch: Epoch,
        id: &str,
        items: i64,
        at: i64,
    ) -> Result<bool, EngineError> {
        let mut give = GIVE.prepare_invoke();
        give.key(&layout.keys(to).sale)
            .arg(epoch.get())
            .arg(id)
            .arg(items)
            .arg(at)
            .arg(HORIZON.as_millis() as u64);
        let (code, _): (i64, i64) = give
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        let mut connection = self.connection.clone();
        match code {
            1 => {
                let _: i64 = redis::cmd("HDEL")
                    .arg(&layout.keys(from).sale)
                    .arg(format!("xout:{id}"))
                    .query_async(&mut connection)
                    .await
                    .map_err(redis_error)?;
                Ok(true)
            }
            2 => {
                let mut untake = UNTAKE.prepare_invoke();
                untake.key(&layout.keys(from).sale).arg(id);
                let _: i64 = untake
                    .invoke_async(&mut connection)
                    .await
                    .map_err(redis_error)?;
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    /// One background pass over one sale: finishes stale transfers, prunes
    /// old give marks, and levels the poorest shard from the richest.
    async fn pass(&self, layout: &Layout, now_ms: i64) -> Result<(), EngineError> {
        let hashes = super::hashes(&self.connection, layout).await?;
        let epoch_of =
            |hash: &HashMap<String, String>| hash.get("epoch").and_then(|e| e.parse::<u64>().ok());
        let Some(epoch) = epoch_of(&hashes[0]).filter(|&e| e > 0).map(Epoch::new) else {
            return Ok(()); // closed, rebuilding, or gone
        };
        for (from, hash) in (0u16..).zip(&hashes) {
            self.finish_stale(layout, from, hash, epoch, now_ms).await?;
        }
        if hashes.iter().any(|h| epoch_of(h) != Some(epoch.get())) {
            return Ok(()); // a rebuild is under way
        }
        let left: Vec<u64> = hashes
            .iter()
            .map(|h| h.get("remaining").and_then(|r| r.parse().ok()).unwrap_or(0))
            .collect();
        let average = left.iter().sum::<u64>() / left.len() as u64;
        let by_stock = |a: &(usize, &u64), b: &(usize, &u64)| a.1.cmp(b.1);
        let (Some((poorest, &low)), Some((richest, &high))) = (
            left.iter().enumerate().min_by(by_stock),
            left.iter().enumerate().max_by(by_stock),
        ) else {
            return Ok(());
        };
        let amount = (high.saturating_sub(average)).min(average.saturating_sub(low));
        if low * 4 < average && amount > 0 {
            self.transfer(
                layout,
                richest as u16,
                poorest as u16,
                epoch,
                amount as u32,
                0,
            )
            .await?;
        }
        Ok(())
    }

    /// Gives the stale transfers recorded in shard `from` (its `hash`), and
    /// drops give marks too old for any give to come.
    async fn finish_stale(
        &self,
        layout: &Layout,
        from: u16,
        hash: &HashMap<String, String>,
        epoch: Epoch,
        now_ms: i64,
    ) -> Result<(), EngineError> {
        for (id, record) in records(hash, "xout:") {
            let Some((to, items, at)) = parse_out(record) else {
                continue;
            };
            if now_ms - at >= STALE.as_millis() as i64 && to < layout.len() {
                self.give(layout, from, to, epoch, id, items, at).await?;
            }
        }
        let old: Vec<String> = records(hash, "xin:")
            .filter(|(_, at)| {
                at.parse::<i64>()
                    .is_ok_and(|at| now_ms - at > 10 * HORIZON.as_millis() as i64)
            })
            .map(|(id, _)| format!("xin:{id}"))
            .collect();
        if !old.is_empty() {
            let _: i64 = redis::cmd("HDEL")
                .arg(&layout.keys(from).sale)
                .arg(old)
                .query_async(&mut self.connection.clone())
                .await
                .map_err(redis_error)?;
        }
        Ok(())
    }
}

/// Starts the background pass over the sharded sales of `layouts`; it ends
/// when the engine (its transfers) is dropped.
pub(in crate::redis) fn spawn_rebalancer(transfers: Weak<Transfers>, layouts: Weak<Layouts>) {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(PASS);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let (Some(transfers), Some(layouts)) = (transfers.upgrade(), layouts.upgrade()) else {
                return;
            };
            let now_ms = chrono::Utc::now().timestamp_millis();
            for (sale, layout) in layouts.sharded_since(now_ms - ACTIVE.as_millis() as i64) {
                if let Err(error) = transfers.pass(&layout, now_ms).await {
                    tracing::debug!(%sale, %error, "leveling a sharded sale's shards failed; the next pass tries again");
                }
            }
        }
    });
}

/// Items taken from a shard and not yet given (as read from every shard's
/// hash): records whose receiver has no give mark for them.
pub(in crate::redis) fn in_flight(hashes: &[HashMap<String, String>]) -> u64 {
    let mut items = 0;
    for hash in hashes {
        for (id, record) in records(hash, "xout:") {
            let Some((to, taken, _)) = parse_out(record) else {
                continue;
            };
            let given = hashes
                .get(usize::from(to))
                .is_some_and(|receiver| receiver.contains_key(&format!("xin:{id}")));
            if !given {
                items += taken as u64;
            }
        }
    }
    items
}

/// The fields of `hash` named `prefix` + id, as (id, value).
fn records<'a>(
    hash: &'a HashMap<String, String>,
    prefix: &'a str,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    hash.iter()
        .filter_map(move |(field, value)| field.strip_prefix(prefix).map(|id| (id, value.as_str())))
}

/// A take record: `receiver:items:take time ms`.
fn parse_out(record: &str) -> Option<(u16, i64, i64)> {
    let mut parts = record.split(':');
    let to = parts.next()?.parse().ok()?;
    let items = parts.next()?.parse().ok()?;
    let at = parts.next()?.parse().ok()?;
    Some((to, items, at))
}
