//! The order store: the durable record of sales and orders, the source of
//! truth the engine is rebuilt from, and the arbiter of every commit.
//! PostgreSQL in production, SQLite in the data directory for the embedded
//! default; one implementation over sqlx's `Any` driver and one schema
//! (`migrations/store/`).
//!
//! The store checks the invariants itself: a commit locks the sale's row and
//! accepts an order only if its epoch is the sale's and it fits the stock,
//! the buyer's limit and the buyer's idempotency keys (see `arbiter`), so
//! no engine fault, stale Redis or racing instance can make it hold an
//! oversold sale.
//!
//! # Layout
//! - `lib.rs`: opening, sales and reading orders, and the order-transition
//!   counter every module reports to.
//! - [`arbiter`]: committing orders (one verdict per order).
//!   - `arbiter::purchase`: deciding purchases in the store itself.
//!   - `arbiter::rows`: the sale, holding and sold-count rows the arbiter
//!     reads and writes, and the sales' row locks.
//! - [`engine`]: [`StoreEngine`], the store deciding purchases as a stock
//!   engine (`--engine postgres`, and every sale moved to the fallback).
//! - [`authority`]: epochs and the fenced move of a sale's authority.
//! - [`releases`]: cancelling, and the releases the engine still owes.
//! - [`holds`]: confirming held orders and expiring unpaid ones.
//! - `waiting_rooms`: a sale's waiting room, saved with the sale.
//! - `decode`: sales and orders read from their rows.
//! - [`engine_views`]: every instance's view of the engine, which a move
//!   to the fallback is decided from.
//! - [`draws`]: draw sales' settings, entries and results, written under
//!   a lease so one instance runs a draw at a time.
//! - `login_failures`: failed dashboard logins, counted across instances.
//! - `retirement`: ended sales and what the engine still owes them.
//! - `sqlite`: the settings of every SQLite connection.
//! - [`probe`]: the readiness ping's own connection.

pub mod arbiter;
pub mod authority;
mod bulk;
mod calls;
mod decode;
pub mod draws;
pub mod engine;
pub mod engine_views;
mod error;
pub mod holds;
mod login_failures;
pub mod probe;
pub mod releases;
mod retirement;
mod sqlite;
mod waiting_rooms;

use decode::{order_from_row, order_from_row_as, sale_from_row};

pub use calls::{Calls, Down, Outage, inline_call_started};
pub use engine::StoreEngine;
pub use error::StoreError;

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::any::AnyPoolOptions;
use sqlx::{AnyPool, Row};
use stockade_core::{Epoch, Order, OrderId, OrderStatus, SaleId, SaleSpec, SkuSpec, SoldCounts};

/// The answer to saving a sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaveSale {
    /// The sale is new.
    Created,
    /// The identical sale existed.
    Exists,
    /// A different sale exists under that id: this is it.
    Conflict(Box<SaleSpec>),
}

/// Which database the store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// PostgreSQL.
    Postgres,
    /// SQLite.
    Sqlite,
}

/// Sales and orders in a database.
#[derive(Debug, Clone)]
pub struct OrderStore {
    pool: AnyPool,
    /// The readiness ping's own connection (`probe`).
    probe: AnyPool,
    kind: StoreKind,
    /// How far the draws' reading of the store's clock is moved
    /// ([`OrderStore::shift_clock`]); 0 outside tests.
    clock_shift_ms: std::sync::Arc<std::sync::atomic::AtomicI64>,
    /// The store's clock when not the database server's.
    clock: Option<std::sync::Arc<dyn stockade_core::Clock>>,
    /// How calls meet the runtime.
    calls: Calls,
    /// The simulated database's outages, if any.
    outage: Option<Outage>,
}

/// How a store is opened beyond its URL: the service's defaults
/// (`StoreOptions::default()`) or the simulator's.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// The store's clock (leases, draws' entry windows, engine views),
    /// instead of the database server's: the simulator's clock of the
    /// database. `None` reads the server's clock.
    pub clock: Option<std::sync::Arc<dyn stockade_core::Clock>>,
    /// How calls meet the async runtime.
    pub calls: Calls,
    /// The simulator's switch that takes the database down.
    pub outage: Option<Outage>,
}

const ORDER_COLUMNS: &str = "id, sale_id, user_id, quantity, items, tier, idempotency_key, \
     status, created_at_ms, expires_at_ms, epoch";
/// Orders the store refused: kept so an order id is decided once, never
/// shown nor counted.
const VOID: &str = "void";
const SALE_COLUMNS: &str = "id, total_stock, per_user_limit, starts_at_ms, ends_at_ms, hold_ms, \
     skus, per_sku_limit, tiers, release_reserved_at_ms, shards";

/// An order id as the store knows it ([`OrderStore::stored`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// Committed, with its current status.
    Order(Order),
    /// Refused by the store: nothing was sold.
    Void,
}

impl OrderStore {
    /// Opens the store at `url` (`postgres://…` or `sqlite://…`) and runs its
    /// migrations.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(url, StoreOptions::default()).await
    }

    /// [`OrderStore::open`] with other [`StoreOptions`].
    pub async fn open_with(url: &str, options: StoreOptions) -> Result<Self, StoreError> {
        let StoreOptions {
            clock,
            calls,
            outage,
        } = options;
        if let Some(outage) = &outage {
            outage.wait_up().await;
        }
        let opened = calls.run(Self::connect(url, calls)).await?;
        Ok(Self {
            clock,
            calls,
            outage,
            ..opened
        })
    }

    async fn connect(url: &str, calls: Calls) -> Result<Self, StoreError> {
        sqlx::any::install_default_drivers();
        let kind = if url.starts_with("sqlite:") {
            StoreKind::Sqlite
        } else {
            StoreKind::Postgres
        };
        let mut options = AnyPoolOptions::new()
            .max_connections(match (kind, calls) {
                (StoreKind::Postgres, _) => 16,
                (StoreKind::Sqlite, Calls::Async) => 4,
                // An inline call that takes several connections in turn
                // cannot let the pool take one back until it ends (the pool
                // does that in a task of its own), so each needs its own.
                (StoreKind::Sqlite, Calls::Inline) => 64,
            })
            .acquire_timeout(Duration::from_secs(3));
        if kind == StoreKind::Sqlite {
            options = options.after_connect(|conn, _meta| {
                Box::pin(async move { sqlite::configure(conn).await })
            });
        }
        let pool = options.connect(url).await?;
        let mut migrator = sqlx::migrate!("./migrations/store");
        // Databases used by earlier builds also record the migrations of
        // the separate PostgreSQL engine they had (since removed).
        migrator.set_ignore_missing(true);
        migrator
            .run(&pool)
            .await
            .map_err(|e| StoreError::Failed(format!("running store migrations: {e}")))?;
        let probe = probe::pool(url, kind)?;
        Ok(Self {
            pool,
            probe,
            kind,
            clock_shift_ms: Default::default(),
            clock: None,
            calls: Calls::Async,
            outage: None,
        })
    }

    /// Which database this is.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// Closes the pool: waits for the connections in use to come back and
    /// ends every session (PostgreSQL then counts their statistics at
    /// once). Any call after this fails as unavailable.
    pub async fn close(&self) {
        // Not through `call`: closing asks nothing of the database.
        self.calls
            .run(async {
                self.pool.close().await;
                self.probe.close().await;
            })
            .await
    }

    /// Makes every open session of the pool report its transactions to
    /// PostgreSQL's statistics now (PostgreSQL 15+; a session otherwise
    /// reports up to ten seconds later), so that counters read next include
    /// everything done so far: for measurements. Nothing on SQLite.
    pub async fn flush_statistics(&self) -> Result<(), StoreError> {
        self.call(async {
            if self.kind != StoreKind::Postgres {
                return Ok(());
            }
            // Held together, so each open session is flushed once.
            let mut held = Vec::new();
            for _ in 0..self.pool.size() {
                held.push(self.pool.acquire().await?);
            }
            for conn in &mut held {
                sqlx::query("SELECT pg_stat_force_next_flush()")
                    .execute(&mut **conn)
                    .await?;
            }
            Ok(())
        })
        .await
    }

    /// Checks that the database answers, on a connection of its own (not
    /// the sales' pool) within [`probe::PING_TIMEOUT`].
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.call(async { probe::ping(&self.probe).await }).await
    }

    /// Records a sale, unless one with that id exists.
    pub async fn save_sale(
        &self,
        spec: &SaleSpec,
        now: DateTime<Utc>,
    ) -> Result<SaveSale, StoreError> {
        self.call(async {
            if insert_sale(&self.pool, spec, now).await? {
                return Ok(SaveSale::Created);
            }
            let existing = self
                .sale(spec.id())
                .await?
                .ok_or_else(|| StoreError::Failed(format!("sale {} vanished", spec.id())))?;
            Ok(if existing == *spec {
                SaveSale::Exists
            } else {
                SaveSale::Conflict(Box::new(existing))
            })
        })
        .await
    }

    /// One sale.
    pub async fn sale(&self, id: &SaleId) -> Result<Option<SaleSpec>, StoreError> {
        self.call(async {
            sqlx::query(&format!("SELECT {SALE_COLUMNS} FROM sales WHERE id = $1"))
                .bind(id.as_str())
                .fetch_optional(&self.pool)
                .await?
                .map(|row| sale_from_row(&row))
                .transpose()
        })
        .await
    }

    /// One order.
    pub async fn order(&self, id: OrderId) -> Result<Option<Order>, StoreError> {
        self.call(async {
            sqlx::query(&format!(
                "SELECT {ORDER_COLUMNS} FROM orders WHERE id = $1 AND status <> '{VOID}'"
            ))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?
            .map(|row| order_from_row(&row))
            .transpose()
        })
        .await
    }

    /// What the store knows of an order id, in one indexed read: the
    /// order, or that it was refused (void), or nothing.
    pub async fn stored(&self, id: OrderId) -> Result<Option<Stored>, StoreError> {
        self.call(async {
            let Some(row) =
                sqlx::query(&format!("SELECT {ORDER_COLUMNS} FROM orders WHERE id = $1"))
                    .bind(id.to_string())
                    .fetch_optional(&self.pool)
                    .await?
            else {
                return Ok(None);
            };
            let status: String = row.try_get("status")?;
            if status == VOID {
                return Ok(Some(Stored::Void));
            }
            order_from_row(&row).map(|order| Some(Stored::Order(order)))
        })
        .await
    }

    /// A page of a sale's orders in id (= creation) order, after `after`.
    pub async fn orders_of_sale(
        &self,
        sale: &SaleId,
        after: Option<OrderId>,
        limit: u32,
    ) -> Result<Vec<Order>, StoreError> {
        self.call(async {
            // UUIDv7 text sorts like the UUIDs; "" sorts before every id.
            let after = after.map(|id| id.to_string()).unwrap_or_default();
            sqlx::query(&format!(
                "SELECT {ORDER_COLUMNS} FROM orders
              WHERE sale_id = $1 AND id > $2 AND status <> '{VOID}'
              ORDER BY id LIMIT $3"
            ))
            .bind(sale.as_str())
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(order_from_row)
            .collect()
        })
        .await
    }

    /// Every order of a sale, committed ones and the void ones that keep an
    /// idempotency key (those as `Cancelled`: they hold no stock, and their
    /// key must keep naming them), for rebuilding the engine.
    pub async fn all_orders(&self, sale: &SaleId) -> Result<Vec<Order>, StoreError> {
        self.call(async {
            let mut all = Vec::new();
            let mut after = String::new();
            loop {
                let page: Vec<Order> = sqlx::query(&format!(
                    "SELECT {ORDER_COLUMNS} FROM orders
                  WHERE sale_id = $1 AND id > $2
                    AND (status <> '{VOID}' OR idempotency_key IS NOT NULL)
                  ORDER BY id LIMIT 10000"
                ))
                .bind(sale.as_str())
                .bind(&after)
                .fetch_all(&self.pool)
                .await?
                .iter()
                .map(|row| {
                    let status: String = row.try_get("status")?;
                    if status == VOID {
                        order_from_row_as(row, OrderStatus::Cancelled)
                    } else {
                        order_from_row(row)
                    }
                })
                .collect::<Result<_, _>>()?;
                let Some(last) = page.last() else {
                    return Ok(all);
                };
                after = last.id.to_string();
                all.extend(page);
            }
        })
        .await
    }

    /// Which of `ids` the store has decided (committed, in any status, or
    /// void): the rest it has never heard of.
    pub async fn decided(
        &self,
        ids: &[OrderId],
    ) -> Result<std::collections::HashSet<OrderId>, StoreError> {
        self.call(async {
            let mut found = std::collections::HashSet::new();
            for chunk in ids.chunks(arbiter::IN_CHUNK) {
                let sql = format!(
                    "SELECT id FROM orders WHERE id IN ({})",
                    arbiter::placeholders(1, chunk.len())
                );
                let mut query = sqlx::query(&sql);
                for id in chunk {
                    query = query.bind(id.to_string());
                }
                for row in query.fetch_all(&self.pool).await? {
                    let id: String = row.try_get("id")?;
                    found.insert(id.parse().map_err(|e| corrupt("order id", e))?);
                }
            }
            Ok(found)
        })
        .await
    }

    /// Whether the store recorded this order as void (refused: nothing
    /// was sold).
    pub async fn is_void(&self, id: OrderId) -> Result<bool, StoreError> {
        self.call(async {
            let row = sqlx::query(&format!(
                "SELECT id FROM orders WHERE id = $1 AND status = '{VOID}'"
            ))
            .bind(id.to_string())
            .fetch_optional(&self.pool)
            .await?;
            Ok(row.is_some())
        })
        .await
    }
}

/// Inserts a sale unless one with that id exists; true if it was new.
async fn insert_sale<'c>(
    executor: impl sqlx::Executor<'c, Database = sqlx::Any>,
    spec: &SaleSpec,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO sales
             (id, total_stock, per_user_limit, starts_at_ms, ends_at_ms, hold_ms, created_at_ms,
              skus, per_sku_limit, sku_sold, tiers, release_reserved_at_ms, tier_sold, shards)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(spec.id().as_str())
    .bind(i64::from(spec.total_stock()))
    .bind(i64::from(spec.per_user_limit()))
    .bind(spec.starts_at().map(|t| t.timestamp_millis()))
    .bind(spec.ends_at().map(|t| t.timestamp_millis()))
    .bind(spec.hold().map(|d| d.as_millis() as i64))
    .bind(now.timestamp_millis())
    .bind(SkuSpec::encode_list(spec.skus()))
    .bind(spec.per_sku_limit().map(i64::from))
    .bind((spec.skus().len() > 1).then(|| vec!["0"; spec.skus().len()].join(",")))
    .bind(
        (!spec.tiers().is_empty())
            .then(|| serde_json::to_string(spec.tiers()))
            .transpose()
            .map_err(|e| StoreError::Failed(format!("encoding the tiers: {e}")))?,
    )
    .bind(spec.release_reserved_at().map(|t| t.timestamp_millis()))
    .bind(
        (!spec.tiers().is_empty())
            .then(|| serde_json::to_string(&SoldCounts::new(spec).tier_sold).unwrap_or_default()),
    )
    .bind(i64::from(spec.shards()))
    .execute(executor)
    .await?;
    Ok(inserted.rows_affected() == 1)
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Failed(format!("the store holds an invalid {what}: {e}"))
}

/// An epoch read from a BIGINT column.
fn epoch_of(value: i64) -> Result<Epoch, StoreError> {
    Epoch::from_i64(value).ok_or_else(|| corrupt("epoch", value))
}

fn millis(ms: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp_millis(ms).ok_or_else(|| corrupt("instant", ms))
}

/// Counts `count` orders of `sale` entering `event` (`held`, `confirmed`,
/// `expired`, `cancelled`, `released`): `stockade_orders_total`.
pub fn order_transitions(sale: &str, event: &'static str, count: usize) {
    if count > 0 {
        metrics::counter!("stockade_orders_total", "sale" => sale.to_owned(), "event" => event)
            .increment(count as u64);
    }
}
