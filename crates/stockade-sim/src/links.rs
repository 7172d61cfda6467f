//! Each instance's network to the data tier: its own link to Redis and its
//! own switch on the store, so that a partition cuts one instance while
//! the others keep theirs. Cheap to clone, and used without the world's
//! lock: a start waiting on a cut store holds that lock until it heals.

use std::sync::Arc;

use parking_lot::Mutex;
use stockade_store::{Down, Outage};

use crate::redis::{Link, Primary};
use crate::scenario::Cut;

/// Every instance's links.
#[derive(Clone)]
pub struct Links {
    inner: Arc<Inner>,
}

struct Inner {
    /// Per instance, on the Redis engine (empty on the memory engine).
    redis: Vec<Link>,
    /// Per instance: its store calls wait, or fail, while it is down.
    store: Vec<Outage>,
    /// How the whole store answers while it is down.
    store_down: Down,
    state: Mutex<StoreState>,
}

/// Why the instances' stores are down: an instance's is while the whole
/// store is, or while a partition cuts it.
struct StoreState {
    down: bool,
    cut: Vec<bool>,
}

impl Links {
    /// Links, none cut, for `instances` instances, to `redis` if they sell
    /// through it, with a store that answers as `store_down` says while it
    /// is down (a cut from it always hangs: nothing answers).
    pub fn new(instances: usize, redis: Option<&Primary>, store_down: Down) -> Self {
        Self {
            inner: Arc::new(Inner {
                redis: redis
                    .map(|primary| (0..instances).map(|_| Link::new(primary.clone())).collect())
                    .unwrap_or_default(),
                store: (0..instances).map(|_| Outage::default()).collect(),
                store_down,
                state: Mutex::new(StoreState {
                    down: false,
                    cut: vec![false; instances],
                }),
            }),
        }
    }

    /// Instance `i`'s link to Redis, on the Redis engine.
    pub fn redis(&self, i: usize) -> Option<Link> {
        self.inner.redis.get(i).cloned()
    }

    /// Makes each script call on every instance's link to Redis take `ms`
    /// of simulated time (see [`Link::slow_scripts`]); before the
    /// instances start.
    pub fn slow_scripts(&self, ms: u64) {
        for link in &self.inner.redis {
            link.slow_scripts(ms);
        }
    }

    /// Instance `i`'s switch on the store: it keeps its state across the
    /// instance's restarts, so one started during an outage waits too.
    pub fn store(&self, i: usize) -> Outage {
        self.inner.store[i].clone()
    }

    /// Takes the whole store down (every instance's calls wait, or fail)
    /// or brings it back (but for instances cut from it).
    pub fn set_store_down(&self, down: bool) {
        let mut state = self.inner.state.lock();
        state.down = down;
        self.apply(&state);
    }

    /// Cuts instance `i` from what `cut` names (`on`), or heals it.
    pub fn cut(&self, i: usize, cut: Cut, on: bool) {
        if cut.redis()
            && let Some(link) = self.inner.redis.get(i)
        {
            link.cut(on);
        }
        if cut.store() {
            let mut state = self.inner.state.lock();
            state.cut[i] = on;
            self.apply(&state);
        }
    }

    fn apply(&self, state: &StoreState) {
        for (outage, cut) in self.inner.store.iter().zip(&state.cut) {
            outage.set(if *cut {
                Some(Down::Hangs)
            } else {
                state.down.then_some(self.inner.store_down)
            });
        }
    }
}
