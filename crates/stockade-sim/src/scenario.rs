//! What a seed draws: the cluster, the sale, the crowd and the faults.
//! Everything a run does follows from this value and the seed, so a run
//! is replayed by drawing it again.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};

use crate::bundles::{make_bundles, rush};
use crate::clock;
use crate::draws::{draw_buyer, draw_faults, draw_sale, make_draw, make_plain};
pub use crate::knobs::Knobs;
pub use crate::partition::Cut;
use crate::partition::draw_partitions;
pub use crate::release::ReleaseRush;
use crate::release::draw_release_rush;

/// How big a run is; the shrinker makes them smaller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Size {
    /// Buyers in the crowd.
    pub buyers: usize,
    /// Faults injected.
    pub faults: usize,
    /// Simulated length of the crowd's arrivals, in ms.
    pub span_ms: u64,
    /// Whether every seed is the standard seed: 3 instances on
    /// Redis with the fallback, the sale, the crowd and the faults still
    /// the seed's (`stockade sim --standard`).
    #[serde(default)]
    pub standard: bool,
    /// Whether every seed's network loses some answers to keyed purchases
    /// (`stockade sim --lost-answers`), not only a third of them.
    #[serde(default)]
    pub lost_answers: bool,
    /// Whether no seed has an outage of Redis (`stockade sim
    /// --without-outage`): the scenarios the seeds had before outages
    /// were drawn, which the mutation test's seeds were chosen on.
    #[serde(default)]
    pub without_outage: bool,
    /// Whether each seed draws its instances' purchase settings (`stockade
    /// sim --knobs`, [`crate::knobs`]) instead of running on the defaults.
    #[serde(default)]
    pub knobs: bool,
}

impl Size {
    /// The flags it has set, by name: each is `--<name>` to `stockade sim`
    /// and `<name>` on a line of the regression corpus.
    pub fn flags(&self) -> impl Iterator<Item = &'static str> {
        let set = [
            self.standard,
            self.lost_answers,
            self.without_outage,
            self.knobs,
        ];
        ["standard", "lost-answers", "without-outage", "knobs"]
            .into_iter()
            .zip(set)
            .filter_map(|(name, on)| on.then_some(name))
    }

    /// Sets the flag named `name` (see [`Size::flags`]); false if there is
    /// no such flag.
    pub fn set_flag(&mut self, name: &str) -> bool {
        match name {
            "standard" => self.standard = true,
            "lost-answers" => self.lost_answers = true,
            "without-outage" => self.without_outage = true,
            "knobs" => self.knobs = true,
            _ => return false,
        }
        true
    }
}

impl Default for Size {
    /// The standard mix: 1,000 buyers, faults on, 60 simulated seconds.
    fn default() -> Self {
        Self {
            buyers: 1_000,
            faults: 6,
            span_ms: 60_000,
            standard: false,
            lost_answers: false,
            without_outage: false,
            knobs: false,
        }
    }
}

/// One SKU of the sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sku {
    /// Its id.
    pub id: String,
    /// Its stock.
    pub stock: u32,
}

/// A tier of the sale: a reserve of the first SKU, its own limit, an
/// earlier start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    /// Its name.
    pub name: String,
    /// Items of the first SKU kept for it.
    pub reserved: u32,
    /// Its buyers' limit.
    pub per_user_limit: u32,
    /// How much earlier than the sale it starts, in ms.
    pub early_ms: u64,
}

/// The sale every buyer of the run wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sale {
    /// Its id.
    pub id: String,
    /// Its SKUs.
    pub skus: Vec<Sku>,
    /// Items per buyer, across SKUs.
    pub per_user_limit: u32,
    /// Items per buyer of each SKU, if capped.
    pub per_sku_limit: Option<u32>,
    /// Payment hold, in seconds, if orders are held.
    pub hold_seconds: Option<u32>,
    /// When it opens, ms after the run starts.
    pub starts_ms: u64,
    /// When it ends, ms after the run starts, if it does.
    pub ends_ms: Option<u64>,
    /// Its tiers.
    pub tiers: Vec<Tier>,
    /// When what is left of the reserves goes to everyone, if it does.
    pub release_reserved_ms: Option<u64>,
    /// When entries to its draw close, ms after the run starts, if it is
    /// drawn (entries open at the start).
    pub draw_close_ms: Option<u64>,
}

impl Sale {
    /// The body of its `POST /v1/sales`.
    pub fn body(&self) -> Value {
        let at = |ms: u64| clock::at(ms).to_rfc3339();
        let mut body = json!({
            "id": self.id,
            "per_user_limit": self.per_user_limit,
            "starts_at": at(self.starts_ms),
        });
        match &self.skus[..] {
            // A sale of `stock` alone has one SKU, `default`.
            [only] if only.id == stockade_core::sku::DEFAULT_SKU => {
                body["stock"] = json!(only.stock);
            }
            skus => {
                body["skus"] = skus
                    .iter()
                    .map(|s| json!({"id": s.id, "stock": s.stock}))
                    .collect();
            }
        }
        if let Some(limit) = self.per_sku_limit {
            body["per_sku_limit"] = json!(limit);
        }
        if let Some(hold) = self.hold_seconds {
            body["hold_seconds"] = json!(hold);
        }
        if let Some(ends) = self.ends_ms {
            body["ends_at"] = json!(at(ends));
        }
        if !self.tiers.is_empty() {
            body["tiers"] = self
                .tiers
                .iter()
                .map(|t| {
                    json!({
                        "name": t.name,
                        "reserved": {self.skus[0].id.clone(): t.reserved},
                        "per_user_limit": t.per_user_limit,
                        "starts_at": at(self.starts_ms.saturating_sub(t.early_ms)),
                    })
                })
                .collect();
        }
        if let Some(release) = self.release_reserved_ms {
            body["release_reserved_at"] = json!(at(release));
        }
        if let Some(close) = self.draw_close_ms {
            body["allocation"] = json!("draw");
            body["entries_open_at"] = json!(at(0));
            body["entries_close_at"] = json!(at(close));
        }
        body
    }

    /// The position of the tier named `name`, if the sale has it.
    pub fn tier_index(&self, name: &str) -> Option<usize> {
        self.tiers.iter().position(|t| t.name == name)
    }

    /// The limit of a buyer of `tier`.
    pub fn limit_of(&self, tier: Option<&str>) -> u32 {
        tier.and_then(|name| self.tiers.iter().find(|t| t.name == name))
            .map_or(self.per_user_limit, |t| t.per_user_limit)
    }
}

/// What a buyer does after their order is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterOrder {
    /// Nothing (a held order then expires).
    Nothing,
    /// The payment arrives this long after the answer (ms).
    Pays(u64),
    /// The buyer cancels this long after the answer (ms).
    Cancels(u64),
}

/// One buyer of the crowd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buyer {
    /// Their id.
    pub user: String,
    /// When they first ask, ms after the run starts.
    pub arrives_ms: u64,
    /// Their tier, if any.
    pub tier: Option<String>,
    /// What they ask for: (SKU index, quantity), a bundle when several.
    pub items: Vec<(usize, u32)>,
    /// Whether they ask for an asynchronous answer.
    pub respond_async: bool,
    /// Whether their purchases carry an idempotency key (some clients
    /// send none; their answers come from the instance's caches sooner).
    pub keyed: bool,
    /// How many times they repeat a purchase that was not answered for
    /// sure (503, an instance down), with the same key.
    pub retries: u32,
    /// Whether they come back for a second purchase (a new key).
    pub buys_again: bool,
    /// What they do once an order is named.
    pub after: AfterOrder,
}

/// Which engine the instances sell through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The embedded default: one instance, stock in its memory.
    Memory,
    /// The simulated Redis, shared by every instance.
    Redis,
}

/// A fault, at an instant of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Instance `0` is stopped and started again (a deploy) `1` ms later.
    Restart(usize, u64),
    /// Instance `0`'s clock jumps by `1` ms.
    ClockJump(usize, i64),
    /// Instance `0` is killed (nothing drained) and started again `1` ms
    /// later.
    Crash(usize, u64),
    /// The store stops answering for `0` ms.
    StoreOutage(u64),
    /// Redis restarts without its data (and scripts).
    RedisLoss,
    /// Redis stops answering for `0` ms.
    RedisFreeze(u64),
    /// Redis applies the next `0` commands and sends no reply.
    RedisDropReplies(usize),
    /// A replica `0` writes behind takes over as the primary.
    RedisFailover(usize),
    /// Instance `0` is cut from `1` for `2` ms; the crowd still reaches it.
    Partition(usize, Cut, u64),
}

impl Fault {
    /// How long it lasts once it strikes, in ms (0 for one that heals at
    /// once; a start after a stop or crash may take longer).
    pub fn lasts_ms(&self) -> u64 {
        match *self {
            Fault::Restart(_, ms)
            | Fault::Crash(_, ms)
            | Fault::StoreOutage(ms)
            | Fault::RedisFreeze(ms)
            | Fault::Partition(_, _, ms) => ms,
            Fault::ClockJump(..)
            | Fault::RedisLoss
            | Fault::RedisDropReplies(_)
            | Fault::RedisFailover(_) => 0,
        }
    }

    /// The fault's kind, for the coverage report.
    pub fn label(&self) -> &'static str {
        match self {
            Fault::Restart(..) => "fault: restart",
            Fault::ClockJump(..) => "fault: clock jump",
            Fault::Crash(..) => "fault: crash",
            Fault::StoreOutage(..) => "fault: store outage",
            Fault::RedisLoss => "fault: Redis loss",
            Fault::RedisFreeze(ms) if *ms >= crate::outages::OUTAGE_MS.start => {
                "fault: Redis out past the fallback's quiet period"
            }
            Fault::RedisFreeze(..) => "fault: Redis freeze",
            Fault::RedisDropReplies(..) => "fault: Redis lost replies",
            Fault::RedisFailover(..) => "fault: Redis failover",
            Fault::Partition(_, Cut::Redis, _) => "fault: partition from Redis",
            Fault::Partition(_, Cut::Store, _) => "fault: partition from the store",
            Fault::Partition(_, Cut::Both, _) => "fault: partition from Redis and the store",
        }
    }
}

/// Everything a run does.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Its seed.
    pub seed: u64,
    /// Its size.
    pub size: Size,
    /// How many instances serve the crowd.
    pub instances: usize,
    /// The engine they sell through.
    pub engine: Engine,
    /// Whether, on Redis, sales move to the store's own engine while Redis
    /// is unavailable (and back once it is healthy).
    pub fallback: bool,
    /// Whether the network loses some answers to keyed purchases, which
    /// their buyers send again: a third of the seeds, every one with
    /// [`Size::lost_answers`].
    pub lost_answers: bool,
    /// The sale's waiting room, if it has one: buyers admitted a second.
    pub room: Option<u32>,
    /// Whether the sale is plain: one SKU (named `default` when the sale
    /// is created with `stock` alone), no tiers, no per-SKU limit, so no
    /// bundles; most of its buyers name no SKU.
    pub plain: bool,
    /// When the rush of big bundles comes (ms after the start), if the
    /// sale is one of many SKUs bought whole in a rush (see
    /// [`crate::bundles`]).
    pub bundles: Option<u64>,
    /// The rush at the reserve release, on a loaded Redis, if the sale
    /// has one (see [`crate::release`]).
    pub release_rush: Option<ReleaseRush>,
    /// Each instance's clock: offset (ms) and drift (ppm).
    pub clocks: Vec<(i64, i64)>,
    /// The sale.
    pub sale: Sale,
    /// The crowd.
    pub buyers: Vec<Buyer>,
    /// The faults, by instant (ms after the start).
    pub faults: Vec<(u64, Fault)>,
    /// The instances' purchase settings, if drawn ([`Size::knobs`]); the
    /// defaults otherwise.
    pub knobs: Option<Knobs>,
}

/// The largest clock offset the documentation allows instances (NTP time):
/// a skew of up to this moves the hold boundary by as much, nothing more.
pub const MAX_OFFSET_MS: i64 = 500;

/// The instances of the standard seed.
pub const STANDARD_INSTANCES: usize = 3;

/// An instance's clock: offset (ms) and drift (ppm).
fn draw_clock(rng: &mut ChaCha8Rng) -> (i64, i64) {
    (
        rng.random_range(-MAX_OFFSET_MS..=MAX_OFFSET_MS),
        rng.random_range(-200..=200),
    )
}

impl Scenario {
    /// The scenario of `seed` at `size`.
    pub fn draw(seed: u64, size: Size) -> Self {
        Self::drawn(seed, size, true)
    }

    /// The scenario of `seed` at `size` as it was drawn before big bundles
    /// and the rush at the release (`tests/streams.rs`: the seeds neither
    /// of them picks draw the same scenario either way).
    #[doc(hidden)]
    pub fn draw_before_workloads(seed: u64, size: Size) -> Self {
        Self::drawn(seed, size, false)
    }

    fn drawn(seed: u64, size: Size, workloads: bool) -> Self {
        // One stream each for the sale, the crowd and the faults, so that a
        // smaller size (the shrinker's) keeps the same sale, the first
        // buyers and the first faults.
        let stream = |n: u64| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(n);
            rng
        };
        let mut rng = stream(0);
        // The embedded default's memory engine serves one instance.
        let (mut engine, mut instances) = if rng.random_bool(0.3) {
            (Engine::Memory, 1)
        } else {
            (Engine::Redis, rng.random_range(1..=3))
        };
        // Whether Redis has the fallback, from a stream of its own, so that
        // the other seeds keep their scenarios.
        let mut fallback = engine == Engine::Redis && stream(5).random_bool(0.5);
        let mut clocks: Vec<(i64, i64)> = (0..instances).map(|_| draw_clock(&mut rng)).collect();
        let mut sale = draw_sale(&mut rng, size);
        if size.standard {
            // The standard seed: its sale and crowd are the seed's, the
            // clocks it lacks come from a stream of their own.
            (engine, instances, fallback) = (Engine::Redis, STANDARD_INSTANCES, true);
            let mut rng = stream(6);
            while clocks.len() < instances {
                clocks.push(draw_clock(&mut rng));
            }
        }
        // Whether the sale is plain, the commonest sale, from a stream of
        // its own, so that the other seeds' sales stay as they were.
        let plain = make_plain(&mut sale, &mut stream(7));
        // Whether answers get lost, from a stream of its own, so that the
        // other seeds' crowds do as they did.
        let lost_answers = size.lost_answers || stream(10).random_bool(1.0 / 3.0);
        // Whether the sale is drawn, from a stream of its own, so that the
        // other seeds' sales stay as they were.
        let mut rng = stream(3);
        if rng.random_bool(0.25) {
            make_draw(&mut sale, &mut rng, size);
        }
        // Whether a sale neither plain nor drawn is one of big bundles
        // bought in a rush, from a stream of its own, so that the other
        // seeds' sales and crowds stay as they were.
        let bundles = (workloads && !plain && sale.draw_close_ms.is_none())
            .then(|| make_bundles(&mut sale, &mut stream(8)))
            .flatten();
        let mut rng = stream(1);
        let mut buyers: Vec<Buyer> = (0..size.buyers)
            .map(|i| draw_buyer(&mut rng, i, &sale, size))
            .collect();
        if let Some(at) = bundles {
            rush(&mut buyers, at);
        }
        // Whether the crowd rushes the reserve release, from a stream of
        // its own, so that the other seeds' crowds stay as they were.
        let mut rng = stream(9);
        let release_rush = (workloads && bundles.is_none())
            .then(|| draw_release_rush(&sale, buyers.len(), &mut rng))
            .flatten();
        if let Some(release_rush) = &release_rush {
            crate::release::rush(&mut buyers, release_rush, &mut rng);
        }
        // Whether it has a waiting room, from a stream of its own, so that
        // the other seeds' sales stay as they were; not for the rushes,
        // which a room would meter.
        let room = (workloads && bundles.is_none() && release_rush.is_none())
            .then(|| crate::rooms::draw_room(&sale, &mut stream(11)))
            .flatten();
        let mut faults = draw_faults(&mut stream(2), engine, instances, size);
        // Partitions of one instance, from a stream of their own, so that
        // the seeds without one keep their faults.
        faults.extend(draw_partitions(&mut stream(4), engine, instances, size));
        // An outage of Redis past the fallback's quiet period, from a
        // stream of its own, so that the seeds without one keep their
        // faults (one alone leaves out those near it).
        if workloads && !size.without_outage {
            crate::outages::add_outage(&mut stream(12), engine, size, &mut faults);
        }
        // Stable: the other faults keep their order.
        faults.sort_by_key(|(at, _)| *at);
        // The settings, from a stream of their own: the rest of the
        // scenario is the same with or without them.
        let knobs = size.knobs.then(|| Knobs::draw(&mut stream(13)));
        Self {
            seed,
            size,
            instances,
            engine,
            fallback,
            lost_answers,
            room,
            plain,
            bundles,
            release_rush,
            clocks,
            sale,
            buyers,
            faults,
            knobs,
        }
    }
}
