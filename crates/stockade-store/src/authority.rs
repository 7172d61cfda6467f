//! Who decides a sale's purchases, and the fenced step that changes it.
//!
//! Every change of authority (the engine rebuilt from the store after it
//! may have lost data; a move to the fallback and back) is
//! [`OrderStore::advance_epoch`]: a compare-and-set of the sale's epoch
//! under its row lock. After it commits, no order decided under the old
//! epoch can commit any more (the arbiter refuses it), so the new authority
//! starts from exactly what the store holds, except for the orders of a
//! primary epoch that a move to the fallback could not drain (the engine
//! was unreachable): those still commit, judged like any other, until the
//! rebuild back to the primary has drained them ([`SaleState::accepts`]).
//!
//! A move to the fallback also needs every instance's view of the engine
//! ([`OrderStore::fallback_hold`]): one instance cut off from Redis must
//! not move a sale that the others still sell through it, and no instance
//! may still hold accepted orders on their way to the store.
//!
//! [`SaleState::accepts`]: super::arbiter::SaleState::accepts

use std::fmt;
use std::str::FromStr;

use stockade_core::{Epoch, SaleId};

use super::arbiter::{STATE_COLUMNS, sale_state_from_row};
use super::{OrderStore, SALE_COLUMNS, StoreError};

/// Who decides a sale's purchases.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Authority {
    /// The configured engine (memory, Redis; or the store itself with
    /// `--engine postgres`).
    Primary,
    /// The store itself, in PostgreSQL, while the primary engine is
    /// unavailable (`--fallback postgres`).
    Fallback,
}

impl Authority {
    /// The name stored in `sales.authority`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Primary => "primary",
            Self::Fallback => "fallback",
        }
    }
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Authority {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "primary" => Ok(Self::Primary),
            "fallback" => Ok(Self::Fallback),
            other => Err(StoreError::Failed(format!(
                "the store holds an unknown sale authority {other:?}"
            ))),
        }
    }
}

/// The answer to [`OrderStore::advance_epoch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advance {
    /// The sale is now under this new epoch and authority.
    Advanced(Epoch),
    /// The sale had moved on from the epoch expected (another instance got
    /// there first): nothing changed; this is where it is.
    Moved {
        /// The sale's epoch.
        epoch: Epoch,
        /// The sale's authority.
        authority: Authority,
    },
    /// No such sale.
    UnknownSale,
}

impl OrderStore {
    /// Moves the sale to `authority` under a new epoch, if it is still under
    /// `expected`: the fenced step of every rebuild and failover. Pending
    /// releases of older epochs are dropped with it: the new authority is
    /// built from the store, where those orders are already cancelled.
    pub async fn advance_epoch(
        &self,
        sale: &SaleId,
        expected: Epoch,
        authority: Authority,
    ) -> Result<Advance, StoreError> {
        self.calls
            .run(async {
                let mut tx = self.pool.begin().await?;
                self.lock_sales(&mut tx, &[sale]).await?;
                let row = sqlx::query(&format!(
                    "SELECT {SALE_COLUMNS}, {STATE_COLUMNS} FROM sales WHERE id = $1"
                ))
                .bind(sale.as_str())
                .fetch_optional(&mut *tx)
                .await?;
                let Some(row) = row else {
                    return Ok(Advance::UnknownSale);
                };
                let state = sale_state_from_row(&row)?;
                if state.epoch != expected {
                    return Ok(Advance::Moved {
                        epoch: state.epoch,
                        authority: state.authority,
                    });
                }
                let next = expected.next();
                // A move to the fallback does not drain the engine's outbox (the
                // engine is unreachable): orders decided under the epoch it leaves
                // still commit until the rebuild back drains that outbox. A move to
                // the primary is a rebuild, which drained it first.
                let undrained = match (state.authority, authority) {
                    (Authority::Primary, Authority::Fallback) => Some(expected.as_i64()),
                    (Authority::Fallback, Authority::Fallback) => {
                        state.undrained.map(Epoch::as_i64)
                    }
                    (_, Authority::Primary) => None,
                };
                sqlx::query(
            "UPDATE sales SET epoch = $1, authority = $2, undrained_epoch = $3 WHERE id = $4",
        )
        .bind(next.as_i64())
        .bind(authority.as_str())
        .bind(undrained)
        .bind(sale.as_str())
        .execute(&mut *tx)
        .await?;
                sqlx::query("DELETE FROM pending_releases WHERE sale_id = $1 AND epoch < $2")
                    .bind(sale.as_str())
                    .bind(next.as_i64())
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Advance::Advanced(next))
            })
            .await
    }
}
