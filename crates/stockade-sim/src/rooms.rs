//! Waiting rooms in the workloads. A quarter of the sales that are not
//! draws (drawn from a stream of their own, so the other seeds keep their
//! sales) have a room: each buyer joins the queue, polls their ticket
//! until admitted (or the queue closes), and buys with the admission token,
//! retries included. What the run checks as it goes: an admission names
//! one order at most (a second purchase with a spent token is refused
//! `admission_spent`), and a fresh token is never refused as missing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::crowd::{Crowd, get};
use crate::history::History;
use crate::scenario::{Buyer, Sale};
use crate::world::json_request;

/// How long an admission lasts: longer than a buyer's retries take.
const ADMISSION_TTL_S: u64 = 30;
/// How long a buyer waits in the queue before giving up.
const PATIENCE_MS: u64 = 30_000;

/// A waiting room for `sale` in a quarter of the seeds whose sale is not
/// a draw (a draw has none): admitting 5 to 200 buyers a second.
pub(crate) fn draw_room(sale: &Sale, rng: &mut ChaCha8Rng) -> Option<u32> {
    (sale.draw_close_ms.is_none() && rng.random_bool(0.25)).then(|| rng.random_range(5..=200))
}

/// The `waiting_room` of a sale's creation body.
pub(crate) fn room_body(admit_per_second: u32) -> serde_json::Value {
    json!({
        "admit_per_second": admit_per_second,
        "admission_ttl_seconds": ADMISSION_TTL_S,
    })
}

/// The orders each admission token named, across the crowd.
#[derive(Clone, Default)]
pub struct Spent(Arc<Mutex<HashMap<String, String>>>);

impl Crowd {
    /// Joins the sale's queue and polls the ticket until admitted: the
    /// admission, or `None` when the queue closed (sold out, ended) or the
    /// buyer gave up.
    pub(crate) async fn admission(&self, buyer: &Buyer, rng: &mut ChaCha8Rng) -> Option<Admission> {
        let deadline = self.time.millis() + PATIENCE_MS;
        while self.time.millis() <= deadline {
            let ticket = self.join(buyer, deadline, rng).await?;
            match self.wait_in_line(buyer, &ticket, deadline, rng).await {
                // Judged at the end (`unknown_tickets`). The buyer joins
                // again, as the answer says.
                Line::Unknown => {
                    self.history.unknown_ticket(&buyer.user);
                    continue;
                }
                Line::Admitted(admission) => return Some(admission),
                Line::Out => return None,
            }
        }
        None
    }

    /// Joins the queue: the ticket, or `None` once it is closed or the
    /// buyer gave up.
    async fn join(&self, buyer: &Buyer, deadline: u64, rng: &mut ChaCha8Rng) -> Option<String> {
        let uri = format!("/v1/sales/{}/queue", self.sale.id);
        let join = json!({"user_id": buyer.user});
        while self.time.millis() <= deadline {
            let instance = rng.random_range(0..self.gateway.instances());
            let request = json_request("POST", &uri, &join, false);
            match self.call(&buyer.user, instance, "join", request).await {
                Some((200 | 201, body)) => return body["ticket"].as_str().map(str::to_owned),
                Some((409, _)) => return None,
                Some((503, _)) | None => {}
                Some((status, body)) => {
                    self.history
                        .unexpected(format!("{} join: {status} {body}", buyer.user));
                    return None;
                }
            }
            tokio::time::sleep(Duration::from_millis(rng.random_range(500..2_000))).await;
        }
        None
    }

    /// Polls `ticket` until it is admitted, closed or unknown.
    async fn wait_in_line(
        &self,
        buyer: &Buyer,
        ticket: &str,
        deadline: u64,
        rng: &mut ChaCha8Rng,
    ) -> Line {
        while self.time.millis() <= deadline {
            let instance = rng.random_range(0..self.gateway.instances());
            let request = get(&format!("/v1/queue/{ticket}"));
            let mut wait_s = 2;
            match self
                .call(&buyer.user, instance, "poll ticket", request)
                .await
            {
                Some((200, body)) => {
                    match body["status"].as_str() {
                        Some("admitted") => {
                            let expires_ms = body["admission_expires_at"]
                                .as_str()
                                .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                                .map(|at| at.timestamp_millis());
                            return match (body["admission_token"].as_str(), expires_ms) {
                                (Some(token), Some(expires_ms)) => Line::Admitted(Admission {
                                    token: token.to_owned(),
                                    expires_ms,
                                }),
                                _ => Line::Out,
                            };
                        }
                        Some("closed") => return Line::Out,
                        _ => {}
                    }
                    // As the waiting page does: back again about when the
                    // room expects to admit it, at most 10 s later.
                    wait_s = body["estimated_wait_seconds"]
                        .as_u64()
                        .unwrap_or(2)
                        .clamp(2, 10);
                }
                Some((404, _)) => return Line::Unknown,
                _ => {}
            }
            let jitter = rng.random_range(0..1_000);
            tokio::time::sleep(Duration::from_millis(wait_s * 1_000 + jitter)).await;
        }
        Line::Out
    }
}

/// The ticket of a buyer's latest join is never superseded, and a shared
/// room puts back one Redis lost at its place (`status.lua`): each such
/// ticket answered 404 `unknown_ticket` broke a promise. Unless two
/// primaries served at once after a failover: a buyer whose joins and
/// polls reach both holds a ticket on each, and each primary answers the
/// other's ticket 404 (a later one superseded, or an earlier one while a
/// live admission is held). A room that is not shared lives in the one
/// instance's memory and dies with it (docs/consistency.md): not judged.
pub fn unknown_tickets(history: &History, shared: bool, two_primaries: bool) -> Vec<String> {
    if !shared || two_primaries {
        return Vec::new();
    }
    history
        .unknown_tickets()
        .into_iter()
        .map(|user| {
            format!("{user}: the ticket of their latest join was answered 404 unknown_ticket")
        })
        .collect()
}

/// An admission to buy: its token, and when it expires (on the clock of
/// the instance that answered; each instance judges it on its own).
pub(crate) struct Admission {
    pub token: String,
    pub expires_ms: i64,
}

/// Where a ticket's wait ended.
enum Line {
    Admitted(Admission),
    Unknown,
    Out,
}

impl Spent {
    /// Records that `token` named `order`: a second order under one token
    /// is an admission spent twice.
    pub fn record(&self, history: &History, user: &str, token: &str, order: &str) {
        let mut spent = self.0.lock();
        match spent.get(token) {
            // A Redis loss or failover loses the spend records, and each
            // admission may buy once more (docs/consistency.md, "What a
            // Redis data loss does cost").
            Some(first) if first != order && !history.redis_lost_writes() => history.unexpected(
                format!("{user}: one admission named two orders, {first} and {order}"),
            ),
            Some(_) => {}
            None => {
                spent.insert(token.to_owned(), order.to_owned());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_admission_naming_a_second_order_is_reported() {
        let history = History::default();
        let spent = Spent::default();
        spent.record(&history, "u1", "t1", "o1");
        spent.record(&history, "u1", "t1", "o1");
        spent.record(&history, "u2", "t2", "o2");
        assert!(history.unexpected_answers().is_empty());
        spent.record(&history, "u1", "t1", "o3");
        assert_eq!(
            history.unexpected_answers(),
            vec!["u1: one admission named two orders, o1 and o3".to_owned()]
        );
        // Once Redis lost writes, an admission may buy once more.
        // Lost replies first disturbed the epoch (seed 0x5eed037b).
        let history = History::default();
        history.disturbed("lost Redis replies");
        history.redis_lost_writes_now("a Redis failover");
        let spent = Spent::default();
        spent.record(&history, "u1", "t1", "o1");
        spent.record(&history, "u1", "t1", "o3");
        assert!(history.unexpected_answers().is_empty());
    }

    #[test]
    fn a_latest_ticket_answered_unknown_is_reported_unless_two_primaries_served() {
        let history = History::default();
        assert!(unknown_tickets(&history, true, false).is_empty());
        history.unknown_ticket("u7");
        assert_eq!(
            unknown_tickets(&history, true, false),
            vec!["u7: the ticket of their latest join was answered 404 unknown_ticket".to_owned()]
        );
        assert!(unknown_tickets(&history, true, true).is_empty());
        assert!(unknown_tickets(&history, false, false).is_empty());
    }
}
