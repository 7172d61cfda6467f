//! The keys of a sale's queue, one script call over them, and the batches
//! of joins and polls that share a call.

use std::sync::{Arc, LazyLock};

use redis::Value;
use stockade_core::SaleId;
use stockade_engine::redis::{LibraryScript, SharedConnection};
use stockade_engine::{BatchError, BatchRunner, Batcher};

use super::super::{QueueError, TicketId};
use super::reply::{malformed, redis_error};

/// The most joins or polls one call carries.
const MAX_BATCH: usize = 256;

/// What every call needs: the connection and the keys' prefix.
pub(super) struct Calls {
    pub(super) connection: SharedConnection,
    pub(super) prefix: String,
}

/// The keys of one sale's queue.
pub(super) struct QueueKeys(pub(super) [String; 5]);

/// A failed batch's error, the same for each of its joins or polls.
impl BatchError for QueueError {
    fn shared(&self) -> Self {
        self.clone()
    }

    fn broken(reason: String) -> Self {
        Self::Failed(reason)
    }
}

/// A script whose calls carry a batch: the requests of one sale that
/// arrive while a call of theirs is in flight, `N` arguments each
/// (join.lua: now, user, fresh ticket, place; status.lua: ticket, now,
/// restore, user, place), sent together as its next call.
pub(super) struct BatchedScript<const N: usize> {
    batcher: Batcher<SaleId, [String; N], Value, QueueError>,
    runner: Arc<ScriptRunner>,
}

/// Runs one batch as one call of its script.
struct ScriptRunner {
    calls: Arc<Calls>,
    script: &'static LazyLock<LibraryScript>,
}

impl<const N: usize> BatchRunner<SaleId, [String; N], Value, QueueError> for ScriptRunner {
    async fn run(
        &self,
        sale: &SaleId,
        requests: Vec<[String; N]>,
    ) -> Result<Vec<Value>, QueueError> {
        let args: Vec<String> = requests.into_iter().flatten().collect();
        self.calls.invoke(self.script, sale, &args).await
    }
}

impl<const N: usize> BatchedScript<N> {
    pub(super) fn new(calls: &Arc<Calls>, script: &'static LazyLock<LibraryScript>) -> Self {
        Self {
            batcher: Batcher::new(MAX_BATCH),
            runner: Arc::new(ScriptRunner {
                calls: Arc::clone(calls),
                script,
            }),
        }
    }

    /// One request's own reply (an array) out of its batch's call.
    pub(super) async fn call(
        &self,
        sale: SaleId,
        args: [String; N],
    ) -> Result<Vec<Value>, QueueError> {
        match self.batcher.submit(sale, args, &self.runner).await? {
            Value::Array(reply) => Ok(reply),
            other => Err(malformed("a batched call", &[other])),
        }
    }
}

impl Calls {
    pub(super) fn keys(&self, sale: &SaleId) -> QueueKeys {
        let base = format!("{}{{{sale}}}", self.prefix);
        QueueKeys(
            ["room", "waiting", "tickets", "users", "admitted"].map(|k| format!("{base}:{k}")),
        )
    }

    /// The spend record of a ticket's admission, in its sale's slot.
    pub(super) fn spend_key(&self, ticket: &TicketId) -> String {
        format!("{}{{{}}}:spent:{ticket}", self.prefix, ticket.sale())
    }

    pub(super) fn rooms_key(&self) -> String {
        format!("{}rooms", self.prefix)
    }

    pub(super) async fn invoke(
        &self,
        script: &LibraryScript,
        sale: &SaleId,
        args: &[String],
    ) -> Result<Vec<Value>, QueueError> {
        let mut invocation = script.prepare_invoke();
        for key in &self.keys(sale).0 {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        invocation
            .invoke_async(&mut self.connection.clone())
            .await
            .map_err(redis_error)
    }
}
