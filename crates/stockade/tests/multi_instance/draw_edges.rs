//! Issue 35's draws at two edges, on the cluster (Redis engine, one
//! PostgreSQL store), each a single short draw:
//!
//! - `close_race`: buyers enter on two instances whose clocks differ by
//!   2 s (one set ahead with libfaketime, `crate::skew`) right up to and
//!   past the close. Entries close in the store, on its clock: every entry
//!   answered 201 is in the frozen set and the published order, every one
//!   refused `entries_closed` is not, whichever instance answered.
//! - `freeze_kill`: the instance making the draw is SIGKILLed after it
//!   froze the entry set and before its first purchase (held there by a
//!   trigger of the test's own in the store); another instance takes the
//!   draw over once the dead one's lease runs out, from the stored
//!   positions.
//!
//! Both then judge the draw with `draw_scenario::checks` (one seed, one
//! order, recomputable by `scripts/verify-draw` against the commitment and
//! the entry digest; the first `stock` entries won; one order per winner
//! and the stock exact in the store and every instance's view) and read
//! the frozen set itself from the store ([`frozen`]).

mod close_race;
mod freeze_kill;

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::cluster::Cluster;

/// A draw's entry set as the store froze it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frozen {
    /// When it was frozen (store clock, ms); None: not yet.
    pub at_ms: Option<i64>,
    /// Its digest; None: not yet.
    pub digest: Option<String>,
    /// The placed entries' ids, by position.
    pub ids: Vec<String>,
    /// Entries without a position.
    pub unplaced: usize,
    /// Whether the positions are exactly 0..n.
    pub dense: bool,
}

/// A small pool on the instances' PostgreSQL database.
pub async fn connect(cluster: &Cluster) -> PgPool {
    PgPoolOptions::new()
        .max_connections(2)
        .connect(cluster.database_url())
        .await
        .expect("connect to the instances' PostgreSQL database")
}

/// The frozen entry set of `sale`, read from the store.
pub async fn frozen(db: &PgPool, sale: &str) -> Frozen {
    let (at_ms, digest): (Option<i64>, Option<String>) =
        sqlx::query_as("SELECT frozen_at_ms, entry_digest FROM draws WHERE sale_id = $1")
            .bind(sale)
            .fetch_one(db)
            .await
            .expect("read the draw's freeze");
    let rows: Vec<(String, Option<i64>)> = sqlx::query_as(
        "SELECT id, position FROM draw_entries WHERE sale_id = $1 ORDER BY position, id",
    )
    .bind(sale)
    .fetch_all(db)
    .await
    .expect("read the draw's entries");
    let placed: Vec<(String, i64)> = rows
        .iter()
        .filter_map(|(id, p)| p.map(|p| (id.clone(), p)))
        .collect();
    Frozen {
        at_ms,
        digest,
        dense: placed.iter().enumerate().all(|(i, (_, p))| *p == i as i64),
        unplaced: rows.len() - placed.len(),
        ids: placed.into_iter().map(|(id, _)| id).collect(),
    }
}

/// Orders of `sale` in the store.
pub async fn orders_of(db: &PgPool, sale: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM orders WHERE sale_id = $1")
        .bind(sale)
        .fetch_one(db)
        .await
        .expect("count the sale's orders")
}

/// What the frozen set must be: placed exactly 0..n, every entry placed,
/// the published order (entry ids) and digest.
pub fn check_frozen(frozen: &Frozen, order: &[String], digest: Option<&str>) -> Vec<String> {
    let mut violations = Vec::new();
    if frozen.at_ms.is_none() || frozen.unplaced > 0 || !frozen.dense {
        violations.push(format!(
            "the store's frozen set: frozen at {:?}, {} entries unplaced, positions 0..n: {}",
            frozen.at_ms, frozen.unplaced, frozen.dense
        ));
    }
    if frozen.ids != order {
        let at = frozen
            .ids
            .iter()
            .zip(order)
            .take_while(|(a, b)| a == b)
            .count();
        violations.push(format!(
            "the published order ({} entries) is not the frozen set by position ({} entries): \
             first difference at position {at}",
            order.len(),
            frozen.ids.len()
        ));
    }
    if frozen.digest.as_deref() != digest {
        violations.push(format!(
            "the published digest {digest:?} is not the frozen set's {:?}",
            frozen.digest
        ));
    }
    violations
}
