//! Micro-batching: requests for one key (a sale under one epoch) that arrive
//! while a call for that key is in flight are sent together as the next
//! call.
//!
//! There is no timer and no added delay: an idle key's first request starts
//! a call at once; requests that queue up behind it form the next batch (at
//! most `max_batch`), so batches grow exactly as fast as the backend falls
//! behind. One call per key is in flight at a time and the queue is FIFO, so
//! a batch holds requests in arrival order and batches run in arrival order.
//!
//! Calls are made by a spawned drain task, never by a caller's own future: a
//! caller that gives up (its HTTP client went away) cannot strand the
//! requests queued behind it.
//!
//! Each purchase carries the [`tracing::Span`] it was queued from (the one
//! its caller named with [`link_batches_to`], else the current one), and
//! each call runs in a span of its own ([`batch_span`]) that follows from
//! all of them: exported as OpenTelemetry traces, one batch is linked to
//! the request of every purchase it decided. With tracing off those are
//! disabled spans, which own nothing.

use std::collections::VecDeque;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::Mutex;
use stockade_core::{
    EngineError, Epoch, IdempotencyKey, Item, OrderId, Purchase, SaleId, UserId, WantedItem,
};
use tokio::sync::oneshot;

tokio::task_local! {
    /// The span the purchases queued in this scope are queued from.
    static QUEUED_FROM: tracing::Span;
}

/// Runs `call` (an engine call) so that the batches deciding the purchases
/// it queues follow from `span` (an OpenTelemetry link to it) rather than
/// from the span current when they are queued: a caller names its request's
/// span while a span of its own step is the current one. Only worth it while
/// `span` is enabled; without it, batches follow from the current span.
pub async fn link_batches_to<F: Future>(span: tracing::Span, call: F) -> F::Output {
    QUEUED_FROM.scope(span, call).await
}

/// One purchase waiting for its batch (the sale and epoch are the batch's
/// key). The order id is made on arrival, so ids (UUIDv7) follow arrival
/// order.
pub(crate) struct BatchedPurchase {
    pub(crate) user: UserId,
    pub(crate) quantity: u32,
    pub(crate) key: Option<IdempotencyKey>,
    /// The items as purchase.lua reads them: `sku=quantity,...`, or empty
    /// for one item of the sale's only SKU.
    pub(crate) items: String,
    /// The buyer's tier, empty for none.
    pub(crate) tier: String,
    pub(crate) order_id: OrderId,
    /// The span the purchase was queued from (its request's, see
    /// [`link_batches_to`]), which the batch's span follows from.
    pub(crate) queued_from: tracing::Span,
}

impl BatchedPurchase {
    pub(crate) fn new(purchase: &Purchase) -> Self {
        Self {
            user: purchase.user_id().clone(),
            quantity: purchase.quantity(),
            key: purchase.idempotency_key().cloned(),
            items: wanted_text(purchase.items()),
            tier: purchase
                .tier()
                .map_or_else(String::new, |tier| tier.to_string()),
            order_id: OrderId::generate(),
            queued_from: QUEUED_FROM
                .try_with(tracing::Span::clone)
                .unwrap_or_else(|_| tracing::Span::current()),
        }
    }
}

/// Items as purchase.lua reads them: empty for one unnamed item.
fn wanted_text(items: &[WantedItem]) -> String {
    let named: Option<Vec<Item>> = items
        .iter()
        .map(|item| {
            Some(Item {
                sku: item.sku.clone()?,
                quantity: item.quantity,
            })
        })
        .collect();
    named.map_or_else(String::new, |items| Item::encode_list(&items))
}

/// The span of one call deciding `purchases` of `sale` under `epoch`
/// (`call` names it: the script or the function): a root span, since the
/// call serves many requests of as many traces, that follows from the span
/// each purchase was queued from (an OpenTelemetry link to each).
pub(crate) fn batch_span(
    engine: &'static str,
    call: &'static str,
    sale: &SaleId,
    epoch: Epoch,
    purchases: &[BatchedPurchase],
) -> tracing::Span {
    let span = tracing::debug_span!(
        parent: None,
        "engine batch",
        otel.name = call,
        engine,
        sale_id = %sale,
        epoch = epoch.get(),
        purchases = purchases.len(),
    );
    if !span.is_disabled() {
        for purchase in purchases {
            span.follows_from(&purchase.queued_from);
        }
    }
    span
}

/// The error of a batch's call, which every request of the batch shares.
pub trait BatchError: Send + 'static {
    /// The same error for one more request of the failed batch, keeping
    /// its kind (callers retry some kinds and not others).
    fn shared(&self) -> Self;
    /// A batch that broke down: its call gave a wrong number of answers,
    /// or the runtime dropped it.
    fn broken(reason: String) -> Self;
}

/// Unavailable and timeout keep their kind (callers retry them); anything
/// else is a backend error.
impl BatchError for EngineError {
    fn shared(&self) -> Self {
        match self {
            Self::Unavailable(source) => Self::Unavailable(source.to_string().into()),
            Self::Timeout(message) => Self::Timeout(message.clone()),
            other => Self::backend(other.to_string()),
        }
    }

    fn broken(reason: String) -> Self {
        Self::backend(reason)
    }
}

/// Runs one batch: one answer per request, in the same order.
pub trait BatchRunner<Key, Request, Answer, Error = EngineError>: Send + Sync + 'static {
    /// Decides every request of the batch in one backend call.
    fn run(
        &self,
        key: &Key,
        requests: Vec<Request>,
    ) -> impl Future<Output = Result<Vec<Answer>, Error>> + Send;
}

struct Waiting<Request, Answer, Error> {
    request: Request,
    answer: oneshot::Sender<Result<Answer, Error>>,
}

struct Queue<Request, Answer, Error> {
    waiting: VecDeque<Waiting<Request, Answer, Error>>,
    /// Whether a drain task owns this queue (a call is in flight or about to
    /// be).
    draining: bool,
}

/// One key's queue, shared by its submitters and its drain task.
type SharedQueue<Request, Answer, Error> = Arc<Mutex<Queue<Request, Answer, Error>>>;

/// Every key's queue.
type Queues<Key, Request, Answer, Error> = Arc<DashMap<Key, SharedQueue<Request, Answer, Error>>>;

/// Per-key queues of requests and the drain tasks that batch them.
pub struct Batcher<Key, Request, Answer, Error = EngineError> {
    queues: Queues<Key, Request, Answer, Error>,
    max_batch: usize,
}

impl<Key, Request, Answer, Error> Batcher<Key, Request, Answer, Error>
where
    Key: Eq + Hash + Clone + Send + Sync + 'static,
    Request: Send + 'static,
    Answer: Send + 'static,
    Error: BatchError,
{
    /// Batches of at most `max_batch` requests (at least 1).
    pub fn new(max_batch: usize) -> Self {
        Self {
            queues: Arc::new(DashMap::new()),
            max_batch: max_batch.max(1),
        }
    }

    /// Queues `request` under `key` and waits for its answer. If no call for
    /// `key` is in flight, one starts at once (in a spawned task, with this
    /// request and whatever queued meanwhile).
    pub async fn submit<R>(
        &self,
        key: Key,
        request: Request,
        runner: &Arc<R>,
    ) -> Result<Answer, Error>
    where
        R: BatchRunner<Key, Request, Answer, Error>,
    {
        let (answer, receiver) = oneshot::channel();
        let queue = Arc::clone(
            self.queues
                .entry(key.clone())
                .or_insert_with(|| {
                    Arc::new(Mutex::new(Queue {
                        waiting: VecDeque::new(),
                        draining: false,
                    }))
                })
                .value(),
        );
        let start_drain = {
            let mut queue = queue.lock();
            queue.waiting.push_back(Waiting { request, answer });
            !std::mem::replace(&mut queue.draining, true)
        };
        if start_drain {
            tokio::spawn(drain(
                Arc::clone(&self.queues),
                key,
                queue,
                Arc::clone(runner),
                self.max_batch,
            ));
        }
        receiver.await.unwrap_or_else(|_| {
            Err(Error::broken(
                "the batch carrying this request was dropped (the runtime is shutting down)"
                    .to_owned(),
            ))
        })
    }
}

/// Sends batches for one key until its queue is empty, then retires the
/// queue so idle keys do not accumulate.
async fn drain<Key, Request, Answer, Error, R>(
    queues: Queues<Key, Request, Answer, Error>,
    key: Key,
    queue: SharedQueue<Request, Answer, Error>,
    runner: Arc<R>,
    max_batch: usize,
) where
    Key: Eq + Hash,
    Error: BatchError,
    R: BatchRunner<Key, Request, Answer, Error>,
{
    loop {
        let batch: Vec<Waiting<Request, Answer, Error>> = {
            let mut queue = queue.lock();
            if queue.waiting.is_empty() {
                queue.draining = false;
                break;
            }
            let take = queue.waiting.len().min(max_batch);
            queue.waiting.drain(..take).collect()
        };
        let (requests, answers): (Vec<Request>, Vec<_>) = batch
            .into_iter()
            .map(|waiting| (waiting.request, waiting.answer))
            .unzip();
        let expected = requests.len();
        match runner.run(&key, requests).await {
            Ok(results) if results.len() == expected => {
                for (answer, result) in answers.into_iter().zip(results) {
                    let _ = answer.send(Ok(result));
                }
            }
            Ok(results) => {
                let error = format!(
                    "a batch of {expected} requests got {} answers",
                    results.len()
                );
                for answer in answers {
                    let _ = answer.send(Err(Error::broken(error.clone())));
                }
            }
            Err(error) => {
                // Every request of the batch shares the call's fate.
                for answer in answers {
                    let _ = answer.send(Err(error.shared()));
                }
            }
        }
    }
    // Retire the queue if it is still idle; a request that raced in after
    // the check above started its own drain and keeps it.
    queues.remove_if(&key, |_, current| {
        Arc::ptr_eq(current, &queue) && {
            let queue = current.lock();
            !queue.draining && queue.waiting.is_empty()
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// The request that fails its batch.
    const UNLUCKY: u32 = 1_000;

    /// Doubles numbers, slowly, recording the batches it saw.
    struct Recorder {
        batches: Mutex<Vec<Vec<u32>>>,
        calls_in_flight: AtomicUsize,
        most_in_flight: AtomicUsize,
    }

    impl BatchRunner<&'static str, u32, u32> for Recorder {
        async fn run(
            &self,
            _key: &&'static str,
            requests: Vec<u32>,
        ) -> Result<Vec<u32>, EngineError> {
            let now = self.calls_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_in_flight.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
            self.batches.lock().push(requests.clone());
            self.calls_in_flight.fetch_sub(1, Ordering::SeqCst);
            if requests.contains(&UNLUCKY) {
                return Err(EngineError::Timeout("an unlucky request".into()));
            }
            Ok(requests.iter().map(|r| r * 2).collect())
        }
    }

    fn recorder() -> Arc<Recorder> {
        Arc::new(Recorder {
            batches: Mutex::new(Vec::new()),
            calls_in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_requests_share_calls_in_arrival_order_one_call_at_a_time() {
        let batcher = Arc::new(Batcher::<&'static str, u32, u32>::new(8));
        let runner = recorder();
        // Submit one by one in a known order: each submit queues before the
        // next starts, so arrival order is 0, 1, 2, ...
        let mut answers = Vec::new();
        for n in 0..40u32 {
            let (batcher, runner) = (Arc::clone(&batcher), Arc::clone(&runner));
            answers.push(tokio::spawn(async move {
                batcher.submit("sale", n, &runner).await
            }));
            tokio::task::yield_now().await;
        }
        for (n, answer) in answers.into_iter().enumerate() {
            assert_eq!(answer.await.unwrap().unwrap(), n as u32 * 2);
        }
        let batches = runner.batches.lock().clone();
        assert!(batches.len() < 40, "requests were batched: {batches:?}");
        assert!(batches.iter().all(|b| b.len() <= 8), "{batches:?}");
        let flat: Vec<u32> = batches.concat();
        let mut sorted = flat.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..40).collect::<Vec<_>>());
        assert_eq!(runner.most_in_flight.load(Ordering::SeqCst), 1);
        // The idle queue was retired.
        assert!(batcher.queues.is_empty());
    }

    #[tokio::test]
    async fn an_idle_key_is_called_at_once_and_keys_do_not_wait_for_each_other() {
        let batcher = Batcher::<&'static str, u32, u32>::new(8);
        let runner = recorder();
        let (a, b) = tokio::join!(
            batcher.submit("a", 1, &runner),
            batcher.submit("b", 2, &runner)
        );
        assert_eq!((a.unwrap(), b.unwrap()), (2, 4));
        assert_eq!(runner.most_in_flight.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_call_fails_its_whole_batch_with_the_same_kind_and_only_it() {
        let batcher = Batcher::<&'static str, u32, u32>::new(8);
        let runner = recorder();
        assert_eq!(batcher.submit("s", 1, &runner).await.unwrap(), 2);
        // Both queue before the drain task runs: one batch, one fate.
        let (unlucky, neighbour) = tokio::join!(
            batcher.submit("s", UNLUCKY, &runner),
            batcher.submit("s", 3, &runner)
        );
        assert!(matches!(unlucky, Err(EngineError::Timeout(_))));
        assert!(matches!(neighbour, Err(EngineError::Timeout(_))));
        assert_eq!(runner.batches.lock().last().unwrap(), &vec![UNLUCKY, 3]);
        // The next batch is not affected.
        assert_eq!(batcher.submit("s", 4, &runner).await.unwrap(), 8);
    }

    #[tokio::test]
    async fn a_caller_that_gives_up_does_not_strand_the_others() {
        let batcher = Arc::new(Batcher::<&'static str, u32, u32>::new(8));
        let runner = recorder();
        let quitter = {
            let (batcher, runner) = (Arc::clone(&batcher), Arc::clone(&runner));
            tokio::spawn(async move { batcher.submit("s", 1, &runner).await })
        };
        tokio::task::yield_now().await;
        quitter.abort();
        assert_eq!(batcher.submit("s", 2, &runner).await.unwrap(), 4);
    }
}
