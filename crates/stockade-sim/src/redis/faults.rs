//! Faults the simulator injects into a server: a restart that loses
//! everything, a freeze, replies that never arrive, a flushed scripts
//! cache, and a replica that lags behind by some writes.

use super::server::State;
use super::{SimRedis, run_id};

impl SimRedis {
    /// Restarts the server empty: data, scripts and Functions are lost, the
    /// run id changes, and every open connection is dropped (its client
    /// sees the connection broken).
    pub fn restart_empty(&self) {
        let mut shared = self.shared();
        let mut generation = 0;
        self.inner.status.send_modify(|status| {
            status.generation += 1;
            status.frozen = false;
            generation = status.generation;
        });
        shared.state = State::new(run_id(&self.inner.name, generation));
        shared.drop_replies = 0;
    }

    /// Ends every open connection, data kept (its clients see their
    /// connections broken and connect again): a failover's demotion of the
    /// old primary.
    pub fn drop_connections(&self) {
        self.inner
            .status
            .send_modify(|status| status.generation += 1);
    }

    /// Stops answering: commands are read but neither run nor answered
    /// until [`SimRedis::thaw`].
    pub fn freeze(&self) {
        self.inner.status.send_modify(|status| status.frozen = true);
    }

    /// Answers again, in order, what was read while frozen.
    pub fn thaw(&self) {
        self.inner
            .status
            .send_modify(|status| status.frozen = false);
    }

    /// The next `n` commands from connections are run but their replies
    /// never sent; each such connection then looks hung: what it sends
    /// after is lost, unrun and unanswered, as behind a network that
    /// stopped delivering. Connection set-up (CLIENT, SELECT...) is not
    /// counted.
    pub fn drop_replies(&self, n: usize) {
        self.shared().drop_replies = n;
    }

    /// Empties the scripts cache, as SCRIPT FLUSH does: EVALSHA answers
    /// NOSCRIPT until the script is loaded again.
    pub fn flush_scripts(&self) {
        self.shared().state.scripts.clear();
    }

    /// A replica that has all but the last `by_writes` write effects of
    /// this server (as Redis 7 replicates them: a script's writes, not the
    /// script), ready to be promoted: its own run id, no scripts cached,
    /// the Functions it was sent. Clients connect to it instead.
    pub fn replica_lagging(&self, by_writes: usize) -> SimRedis {
        let (log, name) = {
            let shared = self.shared();
            let log = &shared.state.log;
            let kept = log.len().saturating_sub(by_writes);
            let number = self
                .inner
                .replicas
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (
                log[..kept].to_vec(),
                format!("{}/replica-{number}", self.inner.name),
            )
        };
        let replica = SimRedis::new(name, self.inner.clock.clone());
        {
            let mut shared = replica.shared();
            for effect in &log {
                let reply = shared.state.execute(&self.inner.clock, effect);
                debug_assert!(!reply.is_error(), "replaying {effect:?}: {reply:?}");
            }
        }
        replica
    }
}
