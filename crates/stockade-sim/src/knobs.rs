//! The purchase settings of a run's instances, drawn from the seed
//! (`stockade sim --knobs`, `knobs` in the regression corpus): the batch's
//! size and wait, the commit deadline and the reconciler's grace, and how
//! the deployment's store fails. A run on the defaults never meets what
//! needs a batch of one, a deadline that answers 202 at once or a grace
//! that leaves a dead instance's outbox to a rebuild; FoundationDB draws
//! its knobs in simulation for the same reason. Each value is one an
//! operator may set (`stockade serve --help`), or a deployment's.

use rand::seq::IndexedRandom;
use rand_chacha::ChaCha8Rng;
use stockade_server::config::RawConfig;
use stockade_store::Down;

/// The settings a seed drew; every instance of the run has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knobs {
    /// `--batch-max`: most orders per store transaction.
    pub batch_max: usize,
    /// `--batch-delay-ms`: longest wait for a batch to fill.
    pub batch_delay_ms: u64,
    /// `--commit-deadline-ms`: how long a purchase waits for its commit
    /// before answering 202 `pending`.
    pub commit_deadline_ms: u64,
    /// `--outbox-grace-ms`: how old an outbox entry must be before any
    /// reconciler commits it; longer than the deadline.
    pub outbox_grace_ms: u64,
    /// How the store answers while it is down (a store outage): not at
    /// all (a server that hangs), or with an error at once (a pooler in
    /// front of a server that is gone), which a retry loop without a pause
    /// turns into a spin.
    pub store_down: Down,
}

impl Knobs {
    /// One draw: the defaults are among the choices, the ends of each
    /// range too.
    pub fn draw(rng: &mut ChaCha8Rng) -> Self {
        let commit_deadline_ms = *[100, 500, 2_000].choose(rng).expect("choices");
        Self {
            batch_max: *[1, 2, 8, 512].choose(rng).expect("choices"),
            batch_delay_ms: *[0, 2, 20].choose(rng).expect("choices"),
            commit_deadline_ms,
            outbox_grace_ms: commit_deadline_ms
                + *[100, 8_000, 60_000].choose(rng).expect("choices"),
            // Drawn last: the draws above stay those of earlier versions.
            store_down: *[Down::Hangs, Down::Refuses].choose(rng).expect("choices"),
        }
    }

    /// Sets them on an instance's settings.
    pub fn apply(&self, raw: &mut RawConfig) {
        let purchases = &mut raw.purchases;
        purchases.batch_max = Some(self.batch_max);
        purchases.batch_delay_ms = Some(self.batch_delay_ms);
        purchases.commit_deadline_ms = Some(self.commit_deadline_ms);
        purchases.outbox_grace_ms = Some(self.outbox_grace_ms);
    }

    /// As `stockade serve` flags, for the event log and the report.
    pub fn flags(&self) -> String {
        format!(
            "--batch-max {} --batch-delay-ms {} --commit-deadline-ms {} --outbox-grace-ms {}",
            self.batch_max, self.batch_delay_ms, self.commit_deadline_ms, self.outbox_grace_ms
        )
    }

    /// The flags and how the store fails, for the event log.
    pub fn describe(&self) -> String {
        let down = match self.store_down {
            Down::Hangs => "hangs",
            Down::Refuses => "refuses at once",
        };
        format!("{}; a store that is down {down}", self.flags())
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn every_draw_is_a_valid_setting_and_the_draws_vary() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let draws: Vec<Knobs> = (0..200).map(|_| Knobs::draw(&mut rng)).collect();
        for knobs in &draws {
            let mut raw = RawConfig::default();
            raw.storage.engine = Some("memory".into());
            knobs.apply(&mut raw);
            let env = RawConfig::from_env(|_| None).unwrap();
            stockade_server::config::ServerConfig::resolve(raw, env, None)
                .unwrap_or_else(|e| panic!("{}: {e}", knobs.flags()));
        }
        assert!(draws.iter().any(|k| k.batch_max == 1));
        assert!(draws.iter().any(|k| k.store_down == Down::Refuses));
        assert!(draws.iter().any(|k| k.store_down == Down::Hangs));
        assert!(
            draws
                .iter()
                .any(|k| k.outbox_grace_ms == k.commit_deadline_ms + 100)
        );
    }
}
