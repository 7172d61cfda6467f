//! A draw's fenced writes: the freeze of its entry set (positions and
//! digest, before any purchase) and each run's results.

use sqlx::Row;
use sqlx::any::AnyRow;
use stockade_core::SaleId;
use stockade_core::draw::{DrawKey, Nonce, Seed, draw_order, entry_digest};

use super::super::{OrderStore, StoreError, corrupt};
use super::EntryUpdate;

/// What freezing a draw's entry set came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Freeze {
    /// The set is frozen (now, or by an earlier run: then as it was), with
    /// this digest ([`stockade_core::draw::entry_digest`]).
    Frozen {
        /// The frozen set's digest.
        digest: String,
    },
    /// Entries are still open on the store's clock.
    NotClosed,
    /// Another instance holds the draw's lease (or the caller's ran out).
    LeaseLost,
}

/// Entries per statement writing places or results (at most three values
/// each, within SQLite's and PostgreSQL's limits on parameters).
const CHUNK: usize = 500;

impl OrderStore {
    /// Freezes the entry set of the draw of `sale`, if `owner` holds its
    /// lease and entries have closed on the store's clock: in one
    /// transaction, under the lock entries wait on, derives the seed from
    /// `key` and the stored nonce (checked against the commitment), orders
    /// the entries from it and stores each one's position, the set's
    /// digest, the seed and the instant. A set frozen before is left as it
    /// is and not read again: a re-run draws from the stored positions.
    ///
    /// Fails, changing nothing, when the draw is sealed and `key` is
    /// missing or is not the key the sale was created with.
    pub async fn freeze_draw(
        &self,
        sale: &SaleId,
        owner: &str,
        key: Option<&DrawKey>,
    ) -> Result<Freeze, StoreError> {
        self.calls
            .run(async {
                let mut tx = self.pool.begin().await?;
                if !self.lock_lease(&mut tx, sale, owner).await? {
                    return Ok(Freeze::LeaseLost);
                }
                let draw = sqlx::query(
                    "SELECT entries_close_at_ms, seed, nonce, commitment, entry_digest
               FROM draws WHERE sale_id = $1",
                )
                .bind(sale.as_str())
                .fetch_one(&mut *tx)
                .await?;
                if let Some(digest) = draw.try_get::<Option<String>, _>("entry_digest")? {
                    return Ok(Freeze::Frozen { digest });
                }
                let close: i64 = draw.try_get("entries_close_at_ms")?;
                let now = self.draw_clock_ms(&mut *tx).await?;
                if now < close {
                    return Ok(Freeze::NotClosed);
                }
                let seed = unseal(sale, &draw, key)?;
                let ids: Vec<String> =
                    sqlx::query_scalar("SELECT id FROM draw_entries WHERE sale_id = $1")
                        .bind(sale.as_str())
                        .fetch_all(&mut *tx)
                        .await?;
                let order = draw_order(&seed, &ids).map_err(|e| corrupt("draw entries", e))?;
                let digest = entry_digest(&ids);
                let positioned: Vec<(usize, &String)> = order.iter().enumerate().collect();
                for chunk in positioned.chunks(CHUNK) {
                    let values = (0..chunk.len())
                        .map(|i| format!("(${}, CAST(${} AS BIGINT))", 2 * i + 2, 2 * i + 3))
                        .collect::<Vec<_>>()
                        .join(", ");
                    let sql = format!(
                        "WITH placed (id, position) AS (VALUES {values})
                 UPDATE draw_entries SET position = placed.position FROM placed
                  WHERE draw_entries.id = placed.id AND draw_entries.sale_id = $1"
                    );
                    let mut query = sqlx::query(&sql).bind(sale.as_str());
                    for (position, id) in chunk {
                        query = query.bind(id.as_str()).bind(*position as i64);
                    }
                    query.execute(&mut *tx).await?;
                }
                sqlx::query(
            "UPDATE draws SET frozen_at_ms = $1, entry_digest = $2, seed = $3 WHERE sale_id = $4",
        )
        .bind(now)
        .bind(&digest)
        .bind(seed.to_hex())
        .bind(sale.as_str())
        .execute(&mut *tx)
        .await?;
                tx.commit().await?;
                Ok(Freeze::Frozen { digest })
            })
            .await
    }

    /// Writes a run of the draw of `sale`, if `owner` still holds its
    /// lease: the entries' results, the draw's instant (`drawn`: now on
    /// the store's clock, publishing the seed) and `settled` when the run
    /// settled the draw. All or nothing; false (nothing written) if the
    /// lease passed to another instance.
    pub async fn record_draw(
        &self,
        sale: &SaleId,
        owner: &str,
        drawn: bool,
        updates: &[EntryUpdate],
        settled: bool,
    ) -> Result<bool, StoreError> {
        self.calls
            .run(async {
                let mut tx = self.pool.begin().await?;
                if !self.lock_lease(&mut tx, sale, owner).await? {
                    return Ok(false);
                }
                // Many entries per statement: a draw of many entries is written
                // in a few round trips.
                for chunk in updates.chunks(CHUNK) {
                    let values = (0..chunk.len())
                        .map(|i| {
                            let at = 3 * i + 2;
                            format!(
                                "(${at}, CAST(${} AS TEXT), CAST(${} AS TEXT))",
                                at + 1,
                                at + 2
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(", ");
                    let sql = format!(
                        "WITH decided (id, result, order_id) AS (VALUES {values})
                 UPDATE draw_entries SET result = decided.result, order_id = decided.order_id
                   FROM decided
                  WHERE draw_entries.id = decided.id AND draw_entries.sale_id = $1"
                    );
                    let mut query = sqlx::query(&sql).bind(sale.as_str());
                    for update in chunk {
                        query = query
                            .bind(update.id.as_str())
                            .bind(update.result.as_str())
                            .bind(update.order_id.map(|id| id.to_string()));
                    }
                    query.execute(&mut *tx).await?;
                }
                let now = self.draw_clock_ms(&mut *tx).await?;
                if drawn {
                    // What the draw gave each entry, kept apart from where it
                    // stands after roll-downs: published for auditors.
                    sqlx::query(
                        "UPDATE draw_entries SET drawn_result = result
                  WHERE sale_id = $1 AND drawn_result IS NULL",
                    )
                    .bind(sale.as_str())
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                "UPDATE draws SET drawn_at_ms = $1 WHERE sale_id = $2 AND drawn_at_ms IS NULL",
            )
            .bind(now)
            .bind(sale.as_str())
            .execute(&mut *tx)
            .await?;
                }
                if settled {
                    sqlx::query("UPDATE draws SET settled_at_ms = $1 WHERE sale_id = $2")
                        .bind(now)
                        .bind(sale.as_str())
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(true)
            })
            .await
    }
}

/// The seed of a draw row: the one it was created with (a draw from
/// before seeds were sealed), or derived from `key` and its nonce and
/// checked against its commitment.
fn unseal(sale: &SaleId, draw: &AnyRow, key: Option<&DrawKey>) -> Result<Seed, StoreError> {
    if let Some(seed) = draw.try_get::<Option<String>, _>("seed")? {
        return Seed::from_hex(&seed).map_err(|e| corrupt("draw seed", e));
    }
    let nonce: Option<String> = draw.try_get("nonce")?;
    let nonce =
        nonce.ok_or_else(|| corrupt("draw", format!("sale {sale} has neither seed nor nonce")))?;
    let nonce = Nonce::from_hex(&nonce).map_err(|e| corrupt("draw nonce", e))?;
    let commitment: String = draw.try_get("commitment")?;
    let Some(key) = key else {
        return Err(StoreError::Failed(format!(
            "the draw of sale {sale} is sealed with the deployment's draw key and this instance has none: set STOCKADE_DRAW_KEY (or STOCKADE_DRAW_KEY_FILE) to the key of the instance that created the sale"
        )));
    };
    key.unseal(sale, &nonce, &commitment).ok_or_else(|| {
        StoreError::Failed(format!(
            "this instance's draw key does not give the seed sale {sale} committed to at its creation: every instance must share one STOCKADE_DRAW_KEY; the draw waits for an instance with the right key"
        ))
    })
}
