//! Paying for a held order: `POST /v1/orders/{id}/confirm`, retried like a
//! payment provider retries a webhook, every answer recorded.

use std::time::Duration;

use crate::api;
use crate::cluster::{Endpoints, INSTANCES};
use crate::history::{Answer, Confirm, Recorder};

/// Confirms sent for one order at most (the first and its retries).
const ATTEMPTS: usize = 6;
/// The wait before a retry, doubled each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Whether `answer` is a purchase answer naming a held order, which a
/// paying buyer then confirms.
pub fn holds_an_order(answer: &Answer) -> Option<&str> {
    let status = answer.status()?;
    let held = (200..300).contains(&status) && answer.body()["status"] == "held";
    held.then(|| answer.order_id()).flatten()
}

/// Confirms `order_id`, first on the instance after `bought_on`. No answer,
/// a 503 or `order_pending` (not committed yet) is retried on the next
/// instance with backoff; any other answer is final.
pub async fn pay(
    client: &reqwest::Client,
    endpoints: &Endpoints,
    recorder: &Recorder,
    bought_on: usize,
    order_id: &str,
) {
    let mut backoff = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        let instance = (bought_on + attempt) % INSTANCES;
        let answer = api::confirm(client, &endpoints.get(instance), order_id).await;
        let retry = matches!(
            (answer.status(), answer.code()),
            (None | Some(503), _) | (Some(409), Some("order_pending"))
        );
        recorder.confirm(Confirm {
            instance,
            order_id: order_id.to_owned(),
            answer,
        });
        if !retry {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff *= 2;
    }
}
