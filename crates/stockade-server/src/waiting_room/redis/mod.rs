//! Queues in Redis, shared by every instance: each join, poll and tick is
//! one Lua script over the sale's keys (`lua/*.lua`, with `lua/view.lua`
//! prepended; one Functions library, or EVALSHA on Redis 6, through
//! `stockade_engine::redis::library`), so instances never race; each costs
//! O(log n). Joins and polls of one sale that arrive while a call of
//! theirs is in flight go together as the next call (the engine's
//! [`Batcher`](stockade_engine::Batcher), as for purchases): a crowd costs Redis one call per batch,
//! and each join or poll in it runs as if alone, in arrival order.
//!
//! Positions come from one sorted set per sale, scored by each ticket's
//! own place (see [`TicketId`]): early joiners a random place below
//! [`super::PREQUEUE_PLACES`], later ones their joining instant, so ranks
//! are the queue order, and a ticket polled after Redis lost the queue is
//! put back where it was (`lua/status.lua`). The list of rooms is seeded
//! from the store as well ([`super::ticker`]), so a room Redis forgot is
//! ticked again. All keys of a sale share its `{hash
//! tag}`, like the engine's keys.
//!
//! # Layout
//! - this module: [`RedisQueues`] and its scripts;
//! - `calls`: the keys of a sale's queue, one script call over them, and
//!   the batches of joins and polls;
//! - `reply`: reading the scripts' replies, and Redis's errors as the
//!   queue's.

mod calls;
mod reply;

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use redis::AsyncCommands;
use stockade_core::{SaleId, UserId};
use stockade_engine::RedisEngineConfig;
use stockade_engine::redis::{Library, LibraryScript, SharedConnection};

use super::{
    CloseReason, JoinOutcome, QueueBackend, QueueError, Tick, TickReport, TicketId, TicketState,
    TicketView,
};
use calls::{BatchedScript, Calls};
use reply::{int, malformed, redis_error, state, text, unreadable};

/// The waiting room's scripts, one library (`stockade_waiting_room`, run as
/// Functions or with EVALSHA as the connection chose).
static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let view = include_str!("../lua/view.lua");
    let with_view = |body: &str| [view, body].concat();
    let (join, status, tick, consume) = (
        with_view(include_str!("../lua/join.lua")),
        with_view(include_str!("../lua/status.lua")),
        with_view(include_str!("../lua/tick.lua")),
        with_view(include_str!("../lua/consume.lua")),
    );
    Library::new(
        "stockade_waiting_room",
        &[
            ("join", &join),
            ("status", &status),
            ("tick", &tick),
            ("consume", &consume),
            // One key each: not prepended with `view.lua`.
            (
                "reserve_admission",
                include_str!("../lua/reserve_admission.lua"),
            ),
            (
                "settle_admission",
                include_str!("../lua/settle_admission.lua"),
            ),
        ],
    )
});

static JOIN: LazyLock<LibraryScript> = LazyLock::new(|| LIBRARY.script("join"));
static STATUS: LazyLock<LibraryScript> = LazyLock::new(|| LIBRARY.script("status"));
static TICK: LazyLock<LibraryScript> = LazyLock::new(|| LIBRARY.script("tick"));
static CONSUME: LazyLock<LibraryScript> = LazyLock::new(|| LIBRARY.script("consume"));
static RESERVE_ADMISSION: LazyLock<LibraryScript> =
    LazyLock::new(|| LIBRARY.script("reserve_admission"));
static SETTLE_ADMISSION: LazyLock<LibraryScript> =
    LazyLock::new(|| LIBRARY.script("settle_admission"));

/// Queues in one Redis.
#[derive(Clone)]
pub struct RedisQueues {
    calls: Arc<Calls>,
    joins: Arc<BatchedScript<4>>,
    polls: Arc<BatchedScript<5>>,
}

impl std::fmt::Debug for RedisQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisQueues")
            .field("prefix", &self.calls.prefix)
            .finish_non_exhaustive()
    }
}

impl RedisQueues {
    /// Queues on `connection` (the service shares the engine's, so they
    /// work wherever it does: one server, Sentinel, Cluster); keys start
    /// with `prefix` (the service uses `stockade:wr:`).
    pub fn new(connection: SharedConnection, prefix: &str) -> Self {
        let calls = Arc::new(Calls {
            connection,
            prefix: prefix.to_owned(),
        });
        Self {
            joins: Arc::new(BatchedScript::new(&calls, &JOIN)),
            polls: Arc::new(BatchedScript::new(&calls, &STATUS)),
            calls,
        }
    }

    /// Connects to the Redis `url` names (any form the engine takes).
    pub async fn connect(url: &str, prefix: &str) -> Result<Self, QueueError> {
        let config =
            RedisEngineConfig::from_url(url).map_err(|e| QueueError::Failed(e.to_string()))?;
        let connection = SharedConnection::open(&config)
            .await
            .map_err(|e| QueueError::Failed(e.to_string()))?;
        Ok(Self::new(connection, prefix))
    }
}

#[async_trait]
impl QueueBackend for RedisQueues {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn join(
        &self,
        fresh: &TicketId,
        now_ms: i64,
        prequeue: bool,
    ) -> Result<JoinOutcome, QueueError> {
        let _ = prequeue; // the place in `fresh` says it already
        let user = fresh.user().ok_or_else(|| unreadable(fresh))?;
        let args = [
            now_ms.to_string(),
            user.to_string(),
            fresh.to_string(),
            fresh.place().to_string(),
        ];
        let reply = self.joins.call(fresh.sale(), args).await?;
        let parsed = (|| {
            let [ticket, status, value, created, user] = reply.as_slice() else {
                return None;
            };
            let status = state(status, value)?;
            if let TicketState::Closed(reason) = status {
                return Some(JoinOutcome::Closed(reason));
            }
            Some(JoinOutcome::Joined {
                view: TicketView {
                    ticket: TicketId::from_stored(text(ticket)?),
                    user: UserId::stored(text(user)?).ok()?,
                    state: status,
                },
                created: int(created)? == 1,
            })
        })();
        parsed.ok_or_else(|| malformed("join.lua", &reply))
    }

    async fn ticket(
        &self,
        ticket: &TicketId,
        now_ms: i64,
        restore: bool,
    ) -> Result<Option<TicketView>, QueueError> {
        let user = ticket.user().ok_or_else(|| unreadable(ticket))?;
        let args = [
            ticket.to_string(),
            now_ms.to_string(),
            if restore { "1" } else { "0" }.to_owned(),
            user.to_string(),
            ticket.place().to_string(),
        ];
        let reply = self.polls.call(ticket.sale(), args).await?;
        if reply.is_empty() {
            return Ok(None);
        }
        let parsed = (|| {
            let [status, value, user] = reply.as_slice() else {
                return None;
            };
            Some(TicketView {
                ticket: ticket.clone(),
                user: UserId::stored(text(user)?).ok()?,
                state: state(status, value)?,
            })
        })();
        parsed
            .map(Some)
            .ok_or_else(|| malformed("status.lua", &reply))
    }

    async fn tick(&self, sale: &SaleId, tick: &Tick) -> Result<TickReport, QueueError> {
        let flag = |b: bool| if b { "1" } else { "0" }.to_owned();
        let reply = self
            .calls
            .invoke(
                &TICK,
                sale,
                &[
                    tick.now_ms.to_string(),
                    flag(tick.started),
                    flag(tick.ended),
                    tick.remaining.to_string(),
                    tick.config.admit_per_second.to_string(),
                    tick.config.ttl_ms().to_string(),
                    tick.config.cap(tick.remaining).to_string(),
                    tick.config.burst().to_string(),
                    tick.used_before.to_string(),
                    tick.expired_before_ms.to_string(),
                    flag(tick.sold_out),
                ],
            )
            .await?;
        let parsed = (|| {
            let (head, admitted) = reply.split_at_checked(3)?;
            let closed = text(&head[0])?;
            Some(TickReport {
                admitted: admitted
                    .iter()
                    .map(|t| text(t).map(TicketId::from_stored))
                    .collect::<Option<_>>()?,
                outstanding: u64::try_from(int(&head[1])?).ok()?,
                waiting: u64::try_from(int(&head[2])?).ok()?,
                closed: if closed.is_empty() {
                    None
                } else {
                    Some(CloseReason::parse(&closed)?)
                },
            })
        })();
        parsed.ok_or_else(|| malformed("tick.lua", &reply))
    }

    async fn consume(&self, ticket: &TicketId) -> Result<(), QueueError> {
        self.calls
            .invoke(&CONSUME, &ticket.sale(), &[ticket.to_string()])
            .await?;
        Ok(())
    }

    async fn reserve_admission(
        &self,
        ticket: &TicketId,
        held: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<Option<String>, QueueError> {
        let keep_ms = (until_ms - now_ms).max(1);
        RESERVE_ADMISSION
            .key(self.calls.spend_key(ticket))
            .arg(held)
            .arg(keep_ms)
            .invoke_async(&mut self.calls.connection.clone())
            .await
            .map_err(redis_error)
    }

    async fn settle_admission(
        &self,
        ticket: &TicketId,
        held: &str,
        spent: Option<&str>,
    ) -> Result<(), QueueError> {
        let _: i64 = SETTLE_ADMISSION
            .key(self.calls.spend_key(ticket))
            .arg(held)
            .arg(spent.unwrap_or(""))
            .invoke_async(&mut self.calls.connection.clone())
            .await
            .map_err(redis_error)?;
        Ok(())
    }

    async fn used(&self, sale: &SaleId) -> Result<u64, QueueError> {
        let used: Option<u64> = self
            .calls
            .connection
            .clone()
            .hget(&self.calls.keys(sale).0[0], "used")
            .await
            .map_err(redis_error)?;
        Ok(used.unwrap_or(0))
    }

    async fn register(&self, sale: &SaleId) -> Result<(), QueueError> {
        let _: i64 = self
            .calls
            .connection
            .clone()
            .sadd(self.calls.rooms_key(), sale.as_str())
            .await
            .map_err(redis_error)?;
        Ok(())
    }

    async fn rooms(&self) -> Result<Vec<SaleId>, QueueError> {
        let ids: Vec<String> = self
            .calls
            .connection
            .clone()
            .smembers(self.calls.rooms_key())
            .await
            .map_err(redis_error)?;
        Ok(ids
            .into_iter()
            .filter_map(|id| SaleId::new(id).ok())
            .collect())
    }

    async fn forget(&self, sale: &SaleId, after: std::time::Duration) -> Result<(), QueueError> {
        let ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
        self.retire(sale).await?;
        // One pipeline over the queue's keys, which share one hash tag.
        let mut pipe = redis::pipe();
        for key in &self.calls.keys(sale).0 {
            if ms == 0 {
                pipe.unlink(key).ignore();
            } else {
                pipe.pexpire(key, ms as i64).ignore();
            }
        }
        let () = pipe
            .query_async(&mut self.calls.connection.clone())
            .await
            .map_err(redis_error)?;
        Ok(())
    }

    async fn retire(&self, sale: &SaleId) -> Result<(), QueueError> {
        let _: i64 = self
            .calls
            .connection
            .clone()
            .srem(self.calls.rooms_key(), sale.as_str())
            .await
            .map_err(redis_error)?;
        Ok(())
    }
}
