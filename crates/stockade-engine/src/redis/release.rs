//! Releasing orders: one release_many.lua call per shard.
//!
//! An order lives in the shard of its buyer, which a release does not name:
//! a sharded sale's releases go to every shard at once, and the shard that
//! holds each order decides it ([`shards::owner_answer`]). What a release
//! reports as remaining is the whole sale's, read from every shard after
//! the releases.

use stockade_core::{EngineError, Epoch, OrderId, ReleaseOutcome};

use super::keys::SaleKeys;
use super::scripts::{RELEASE_MANY, redis_error};
use super::shards::{self, Layout};
use super::{RedisEngine, codes};

impl RedisEngine {
    /// Releases `releases` of the sale laid out as `layout`.
    pub(super) async fn release_in(
        &self,
        layout: &Layout,
        releases: &[(OrderId, Epoch)],
    ) -> Result<Vec<ReleaseOutcome>, EngineError> {
        if !layout.is_sharded() {
            return self.release_on(layout.keys(0), releases).await;
        }
        let answers = futures::future::try_join_all(
            layout
                .all()
                .map(|(_, keys)| self.release_on(keys, releases)),
        )
        .await?;
        let mut outcomes: Vec<ReleaseOutcome> = (0..releases.len())
            .map(|n| shards::owner_answer(answers.iter().map(|shard| shard[n])))
            .collect();
        if !outcomes
            .iter()
            .any(|o| matches!(o, ReleaseOutcome::Released { .. }))
        {
            return Ok(outcomes);
        }
        // The sale's stock after all of them, then after each in turn.
        let mut after = shards::remaining_of(&shards::hashes(&self.connection, layout).await?)?;
        for outcome in outcomes.iter_mut().rev() {
            if let ReleaseOutcome::Released {
                quantity,
                remaining,
            } = outcome
            {
                *remaining = after;
                after = after.saturating_sub(*quantity);
            }
        }
        Ok(outcomes)
    }

    /// One release_many.lua call on one shard's keys.
    async fn release_on(
        &self,
        keys: &SaleKeys,
        releases: &[(OrderId, Epoch)],
    ) -> Result<Vec<ReleaseOutcome>, EngineError> {
        let mut invocation = RELEASE_MANY.prepare_invoke();
        invocation
            .key(&keys.sale)
            .key(&keys.holdings)
            .key(&keys.orders)
            .arg(releases.len());
        for (order, epoch) in releases {
            invocation.arg(order.to_string()).arg(epoch.get());
        }
        let reply: Vec<i64> = invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)?;
        if reply.len() != 3 * releases.len() {
            return Err(EngineError::backend(format!(
                "release_many.lua gave {} values for {} releases",
                reply.len(),
                releases.len()
            )));
        }
        reply
            .chunks_exact(3)
            .map(|answer| codes::release(answer[0], answer[1], answer[2], "release_many.lua"))
            .collect()
    }
}
