//! The recorded history: every request the suite sent and what came back.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// What came back for one request.
#[derive(Debug, Clone)]
pub enum Answer {
    /// No usable answer: connection refused or reset, timeout, cut body. It
    /// acknowledges nothing.
    None(String),
    /// An HTTP answer with its JSON body (`Null` when the body was not JSON).
    Http {
        /// The status code.
        status: u16,
        /// The body.
        body: Value,
        /// The `Retry-After` header, if any.
        retry_after: Option<String>,
    },
}

impl Answer {
    /// The status code, if there was an answer.
    pub fn status(&self) -> Option<u16> {
        match self {
            Answer::None(_) => None,
            Answer::Http { status, .. } => Some(*status),
        }
    }

    /// The body (`Null` when there was no answer).
    pub fn body(&self) -> &Value {
        match self {
            Answer::None(_) => &Value::Null,
            Answer::Http { body, .. } => body,
        }
    }

    /// The error code of an error answer (`sold_out`, `rebuilding`, ...).
    pub fn code(&self) -> Option<&str> {
        self.body()["error"]["code"].as_str()
    }

    /// The order an answer names: `order_id` of an order body, or of an
    /// error that carries one.
    pub fn order_id(&self) -> Option<&str> {
        let body = self.body();
        body["order_id"]
            .as_str()
            .or_else(|| body["error"]["order_id"].as_str())
    }

    /// The answer in one line: status and body, or the error.
    pub fn describe(&self) -> String {
        match self {
            Answer::None(error) => format!("no answer ({error})"),
            Answer::Http { status, body, .. } => format!("{status} {body}"),
        }
    }

    /// Whether the answer is one a buyer may meet while the service heals:
    /// an order or a refusal for good (2xx, 409), or 503 with `Retry-After`.
    pub fn is_orderly(&self) -> bool {
        match self {
            Answer::None(_) => false,
            Answer::Http {
                status,
                retry_after,
                ..
            } => matches!(status, 200..=202 | 409) || (*status == 503 && retry_after.is_some()),
        }
    }

    /// A short label for summaries: `201`, `409 sold_out`, `no answer`.
    pub fn label(&self) -> String {
        match (self.status(), self.code()) {
            (None, _) => "no answer".to_owned(),
            (Some(status), Some(code)) => format!("{status} {code}"),
            (Some(status), None) => status.to_string(),
        }
    }
}

/// When a request was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// By the crowd, while faults were injected.
    Crowd,
    /// After healing, selling out with fresh buyers.
    Final,
}

/// A quantity of one SKU: an item of a purchase, or of an order.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Item {
    /// The SKU.
    pub sku: String,
    /// How many.
    pub quantity: u32,
}

impl Item {
    /// `quantity` items of `sku`.
    pub fn new(sku: &str, quantity: u32) -> Self {
        Self {
            sku: sku.to_owned(),
            quantity,
        }
    }
}

/// Items in words: `a×1+b×1`.
pub fn show_items(items: &[Item]) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|i| format!("{}×{}", i.sku, i.quantity))
        .collect();
    parts.join("+")
}

/// One purchase request.
#[derive(Debug, Clone)]
pub struct PurchaseRequest {
    /// Which instance (0, 1, 2) it went to.
    pub instance: usize,
    /// The buyer.
    pub buyer: String,
    /// Items asked for (the sum of `items` when given).
    pub quantity: u32,
    /// The SKUs asked for, on a sale of several SKUs: one item is sent as
    /// `sku` and `quantity`, more as a bundle (`items`). `None`: no SKU
    /// named (a sale of one SKU).
    pub items: Option<Vec<Item>>,
    /// The `Idempotency-Key`, if any.
    pub key: Option<String>,
    /// When it was sent.
    pub phase: Phase,
}

/// A purchase request and its answer.
#[derive(Debug, Clone)]
pub struct Purchase {
    /// What was asked.
    pub request: PurchaseRequest,
    /// What came back.
    pub answer: Answer,
}

/// A cancel request and its answer.
#[derive(Debug, Clone)]
pub struct Cancel {
    /// Which instance it went to.
    pub instance: usize,
    /// The order to cancel.
    pub order_id: String,
    /// What came back.
    pub answer: Answer,
}

/// A confirm request (the buyer paid for a held order) and its answer.
#[derive(Debug, Clone)]
pub struct Confirm {
    /// Which instance it went to.
    pub instance: usize,
    /// The order to confirm.
    pub order_id: String,
    /// What came back.
    pub answer: Answer,
}

/// The complete history of one round.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Every purchase, in the order the answers arrived.
    pub purchases: Vec<Purchase>,
    /// Every cancel.
    pub cancels: Vec<Cancel>,
    /// Every confirm, retries included.
    pub confirms: Vec<Confirm>,
}

impl History {
    /// `label × count` of the answers of one phase, for progress lines.
    pub fn summary(&self, phase: Phase) -> String {
        let answers = self
            .purchases
            .iter()
            .filter(|p| p.request.phase == phase)
            .map(|p| &p.answer);
        tally("purchases", answers)
    }

    /// `label × count` of the confirm answers, for progress lines.
    pub fn confirm_summary(&self) -> String {
        tally("confirms", self.confirms.iter().map(|c| &c.answer))
    }
}

/// `N what: label×count, ...` of some answers.
fn tally<'a>(what: &str, answers: impl Iterator<Item = &'a Answer>) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    for answer in answers {
        *counts.entry(answer.label()).or_default() += 1;
        total += 1;
    }
    let parts: Vec<String> = counts.iter().map(|(l, n)| format!("{l}×{n}")).collect();
    format!("{total} {what}: {}", parts.join(", "))
}

/// When a crowd answer arrived, and its status (None: no answer).
type Arrival = (Instant, Option<u16>);

/// The crowd's answers after a fault, as offsets from the fault.
#[derive(Debug, Clone, Copy)]
pub struct Aftermath {
    /// Answers 503 or none.
    pub refusals: usize,
    /// The first refusal.
    pub first_refusal: Option<Duration>,
    /// The last refusal.
    pub last_refusal: Option<Duration>,
    /// The heal time: the first 201 after the last refusal (the first 201
    /// at all if nothing was refused).
    pub healed: Option<Duration>,
    /// The last 201 of the crowd.
    pub last_201: Option<Duration>,
}

impl std::fmt::Display for Aftermath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s =
            |d: Option<Duration>| d.map_or("-".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()));
        write!(
            f,
            "{} refusals (first {}, last {}), first 201 after them {}, last 201 {}",
            self.refusals,
            s(self.first_refusal),
            s(self.last_refusal),
            s(self.healed),
            s(self.last_201)
        )
    }
}

/// The shared recorder of a round: the history, the count of 201s of the
/// crowd (what the fault script waits for), and whether the crowd is done.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    history: Arc<Mutex<History>>,
    acks: Arc<AtomicUsize>,
    crowd_done: Arc<AtomicBool>,
    /// When each crowd answer arrived and its status (None: no answer).
    timeline: Arc<Mutex<Vec<Arrival>>>,
}

impl Recorder {
    /// Records a purchase and its answer.
    pub fn purchase(&self, request: PurchaseRequest, answer: Answer) {
        if request.phase == Phase::Crowd {
            if answer.status() == Some(201) {
                self.acks.fetch_add(1, Ordering::Relaxed);
            }
            let mut timeline = self.timeline.lock().unwrap();
            timeline.push((Instant::now(), answer.status()));
        }
        let mut history = self.history.lock().unwrap();
        history.purchases.push(Purchase { request, answer });
    }

    /// Records a cancel and its answer.
    pub fn cancel(&self, cancel: Cancel) {
        self.history.lock().unwrap().cancels.push(cancel);
    }

    /// Records a confirm and its answer.
    pub fn confirm(&self, confirm: Confirm) {
        self.history.lock().unwrap().confirms.push(confirm);
    }

    /// 201s answered to the crowd so far.
    pub fn acks(&self) -> usize {
        self.acks.load(Ordering::Relaxed)
    }

    /// Marks the crowd as finished.
    pub fn finish_crowd(&self) {
        self.crowd_done.store(true, Ordering::Relaxed);
    }

    /// Whether the crowd has finished.
    pub fn crowd_done(&self) -> bool {
        self.crowd_done.load(Ordering::Relaxed)
    }

    /// How the crowd fared after a fault injected at `fault` (answers up
    /// to `until` count).
    pub fn aftermath(&self, fault: Instant, until: Option<Instant>) -> Aftermath {
        let timeline = self.timeline.lock().unwrap();
        let window: Vec<(Duration, Option<u16>)> = timeline
            .iter()
            .filter(|(at, _)| *at >= fault && until.is_none_or(|end| *at < end))
            .map(|(at, status)| (at.duration_since(fault), *status))
            .collect();
        let refused = |status: &Option<u16>| matches!(status, None | Some(503));
        let refusals: Vec<Duration> = window
            .iter()
            .filter(|(_, status)| refused(status))
            .map(|(at, _)| *at)
            .collect();
        let last_refusal = refusals.last().copied();
        let healed = window
            .iter()
            .find(|(at, status)| *status == Some(201) && last_refusal.is_none_or(|l| *at > l))
            .map(|(at, _)| *at);
        Aftermath {
            refusals: refusals.len(),
            first_refusal: refusals.first().copied(),
            last_refusal,
            healed,
            last_201: window
                .iter()
                .rev()
                .find(|(_, status)| *status == Some(201))
                .map(|(at, _)| *at),
        }
    }

    /// A copy of the history so far.
    pub fn history(&self) -> History {
        self.history.lock().unwrap().clone()
    }
}
