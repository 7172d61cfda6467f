//! The keys of a sale's queue, one script call over them, and the batches
//! of joins and polls that share a call.

use std::sync::{Arc, LazyLock};

use redis::Value;
use stockade_core::{EngineError, SaleId};
use stockade_engine::BatchRunner;
use stockade_engine::redis::{LibraryScript, SharedConnection};

use super::super::{QueueError, TicketId};
use super::reply::redis_error;

/// The most joins or polls one call carries.
pub(super) const MAX_BATCH: usize = 256;

/// The arguments of one join (join.lua: now, user, fresh ticket, place).
pub(super) type JoinArgs = [String; 4];
/// The arguments of one poll (status.lua: ticket, now, restore, user, place).
pub(super) type StatusArgs = [String; 5];

/// What every call needs: the connection and the keys' prefix.
pub(super) struct Calls {
    pub(super) connection: SharedConnection,
    pub(super) prefix: String,
}

/// The keys of one sale's queue.
pub(super) struct QueueKeys(pub(super) [String; 5]);

/// Runs a batch of joins or polls of one sale as one call of `script`.
pub(super) struct BatchOf<const N: usize> {
    pub(super) calls: Arc<Calls>,
    pub(super) script: &'static LazyLock<LibraryScript>,
}

impl<const N: usize> BatchRunner<SaleId, [String; N], Value> for BatchOf<N> {
    async fn run(
        &self,
        sale: &SaleId,
        requests: Vec<[String; N]>,
    ) -> Result<Vec<Value>, EngineError> {
        let args: Vec<String> = requests.into_iter().flatten().collect();
        self.calls
            .invoke(self.script, sale, &args)
            .await
            .map_err(|error| match error {
                QueueError::Unavailable(why) => EngineError::Unavailable(why.into()),
                QueueError::Failed(why) => EngineError::backend(why),
            })
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
