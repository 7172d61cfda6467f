//! Who buys what, with which key, on which instance: the crowd of a round,
//! generated from a seed so that a failing round can be replayed.
//!
//! 1,600 buyers send two or three requests each (about 4,000 in all) for a
//! sale of 1,000 items with a limit of 2 per buyer:
//! - three in ten are *keyed* buyers: every request of theirs is the same
//!   purchase (same quantity, same `Idempotency-Key`), and each repeat goes
//!   to a different instance than the previous one;
//! - the others send unkeyed requests of quantity 1 or 2 (some of which run
//!   into the limit), and one in twenty-five cancels its first order.
//!
//! Requests are shuffled, then spread round-robin over the instances
//! (replays excepted, see above).
//!
//! On a sale of several SKUs, [`with_bundles`] gives every request a
//! bundle shape instead: one SKU (one or two items) or one item each of
//! two or three SKUs (three items: over the limit, refused whole).

use std::collections::HashMap;
use std::time::Duration;

use crate::cluster::INSTANCES;
use crate::history::Item;

/// Items on sale in every round.
pub const STOCK: u64 = 1_000;
/// Items one buyer may hold.
pub const PER_USER_LIMIT: u64 = 2;
/// Distinct buyers of the crowd.
pub const BUYERS: usize = 1_600;

/// One planned purchase.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The instance it goes to.
    pub instance: usize,
    /// The buyer.
    pub buyer: String,
    /// Items asked for (the sum of `items` when given).
    pub quantity: u32,
    /// On a sale of several SKUs: what of each SKU (see [`with_bundles`]);
    /// `None` names no SKU.
    pub items: Option<Vec<Item>>,
    /// Its `Idempotency-Key`, if any.
    pub key: Option<String>,
    /// Whether the buyer cancels the order if this purchase gets a 201.
    pub cancel: bool,
    /// For a sale with payment holds: whether (and how long after the
    /// answer) the buyer confirms the held order this purchase gets.
    pub pays_after: Option<Duration>,
    /// Whether the request says `Prefer: respond-async`.
    pub prefer_async: bool,
}

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The crowd of one round.
pub fn crowd(seed: u64) -> Vec<Planned> {
    let mut rng = Rng(seed);
    let mut plan = Vec::new();
    for b in 0..BUYERS {
        let buyer = format!("u{b}");
        let requests = 2 + rng.below(2) as usize;
        if rng.below(10) < 3 {
            let quantity = 1 + rng.below(2) as u32;
            let key = format!("key-{b}");
            for _ in 0..requests {
                plan.push(planned(&buyer, quantity, Some(key.clone()), false));
            }
        } else {
            let cancels = rng.below(25) == 0;
            for r in 0..requests {
                let quantity = 1 + rng.below(2) as u32;
                plan.push(planned(&buyer, quantity, None, cancels && r == 0));
            }
        }
    }
    // Fisher-Yates.
    for i in (1..plan.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        plan.swap(i, j);
    }
    let mut last_instance_of_key: HashMap<String, usize> = HashMap::new();
    for (position, request) in plan.iter_mut().enumerate() {
        request.instance = position % INSTANCES;
        if let Some(key) = &request.key {
            if let Some(&previous) = last_instance_of_key.get(key) {
                request.instance = (previous + 1) % INSTANCES;
            }
            last_instance_of_key.insert(key.clone(), request.instance);
        }
    }
    plan
}

fn planned(buyer: &str, quantity: u32, key: Option<String>, cancel: bool) -> Planned {
    Planned {
        instance: 0,
        buyer: buyer.to_owned(),
        quantity,
        items: None,
        key,
        cancel,
        pays_after: None,
        prefer_async: false,
    }
}

/// Marks about `percent`% of the requests, chosen from `seed`, as
/// asynchronous (`Prefer: respond-async`); a keyed buyer's repeats share
/// the choice of their first request.
pub fn with_async(seed: u64, mut plan: Vec<Planned>, percent: u64) -> Vec<Planned> {
    let mut rng = Rng(seed ^ 0x4153_594e_4353);
    let mut by_key: HashMap<String, bool> = HashMap::new();
    for request in &mut plan {
        let draw = rng.below(100) < percent;
        request.prefer_async = match &request.key {
            Some(key) => *by_key.entry(key.clone()).or_insert(draw),
            None => draw,
        };
    }
    plan
}

/// Gives every request a bundle of `skus`, chosen from `seed`; a keyed
/// buyer's repeats share the bundle of their first request (the same
/// purchase, replayed). Shapes: one item of one SKU (30%), two of one SKU
/// (20%), one each of two SKUs (40%), one each of three (10%, over the
/// limit of 2: refused whole). A buyer's requests together often ask for
/// more than the limit, as in [`crowd`].
pub fn with_bundles(seed: u64, mut plan: Vec<Planned>, skus: &[&str]) -> Vec<Planned> {
    assert!(skus.len() >= 2, "bundles need a sale of several SKUs");
    let mut rng = Rng(seed ^ 0x4255_4e44_4c45);
    let mut by_key: HashMap<String, Vec<Item>> = HashMap::new();
    for request in &mut plan {
        let drawn = bundle(&mut rng, skus);
        let items = match &request.key {
            Some(key) => by_key.entry(key.clone()).or_insert(drawn).clone(),
            None => drawn,
        };
        request.quantity = items.iter().map(|i| i.quantity).sum();
        request.items = Some(items);
    }
    plan
}

/// One bundle shape of [`with_bundles`], its SKUs drawn without repeats.
fn bundle(rng: &mut Rng, skus: &[&str]) -> Vec<Item> {
    let mut order: Vec<&str> = skus.to_vec();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let (kinds, each) = match rng.below(100) {
        0..30 => (1, 1),
        30..50 => (1, 2),
        50..90 => (2, 1),
        _ => (3.min(order.len()), 1),
    };
    order[..kinds]
        .iter()
        .map(|sku| Item::new(sku, each))
        .collect()
}

/// The longest a paying buyer of the crowd takes to confirm (below the
/// scenario's 2-second hold, so most payments beat the deadline and a few
/// race it).
pub const LONGEST_PAYMENT_DELAY: Duration = Duration::from_millis(1_500);

/// Chooses, from `seed`, the buyers who pay for their holds: each buyer
/// pays with probability `percent`%, and each of their purchases gets a
/// delay below [`LONGEST_PAYMENT_DELAY`]. A buyer who cancels never pays.
pub fn with_payments(seed: u64, mut plan: Vec<Planned>, percent: u64) -> Vec<Planned> {
    let mut rng = Rng(seed ^ 0x5041_5945_5253);
    let mut payers: HashMap<String, bool> = HashMap::new();
    let longest = LONGEST_PAYMENT_DELAY.as_millis() as u64;
    for request in &mut plan {
        let pays = *payers
            .entry(request.buyer.clone())
            .or_insert_with(|| rng.below(100) < percent);
        if pays && !request.cancel {
            request.pays_after = Some(Duration::from_millis(rng.below(longest)));
        }
    }
    plan
}

#[test]
fn about_the_asked_share_of_buyers_pays_in_time() {
    let plan = with_payments(7, crowd(7), 60);
    let mut buyers: HashMap<&str, bool> = HashMap::new();
    for request in &plan {
        let pays = buyers.entry(&request.buyer).or_default();
        *pays |= request.pays_after.is_some();
        assert!(
            request
                .pays_after
                .is_none_or(|delay| delay < LONGEST_PAYMENT_DELAY)
        );
    }
    let paying = buyers.values().filter(|&&p| p).count();
    let share = paying as f64 / buyers.len() as f64;
    assert!(
        (0.55..0.65).contains(&share),
        "{paying} of {} pay",
        buyers.len()
    );
    // The same seed, the same payers.
    let again = with_payments(7, crowd(7), 60);
    assert!(
        plan.iter()
            .zip(&again)
            .all(|(a, b)| a.pays_after == b.pays_after)
    );
}

#[test]
fn the_crowd_replays_keys_on_other_instances() {
    let plan = crowd(7);
    assert!(
        (3_800..4_200).contains(&plan.len()),
        "{} requests",
        plan.len()
    );
    let mut seen: HashMap<&str, Vec<usize>> = HashMap::new();
    for request in &plan {
        if let Some(key) = &request.key {
            seen.entry(key).or_default().push(request.instance);
        }
    }
    assert!(seen.len() > 300, "{} keys", seen.len());
    for (key, instances) in seen {
        assert!(instances.len() >= 2, "{key} is never replayed");
        assert!(
            instances.windows(2).all(|w| w[0] != w[1]),
            "{key}: {instances:?}"
        );
    }
}

#[test]
fn bundles_are_shared_by_a_key_and_sometimes_over_the_limit() {
    let skus = ["a", "b", "c"];
    let plan = with_bundles(7, crowd(7), &skus);
    let mut by_key: HashMap<&str, &Vec<Item>> = HashMap::new();
    let mut shapes: HashMap<(usize, u32), usize> = HashMap::new();
    for request in &plan {
        let items = request.items.as_ref().expect("every request has a bundle");
        assert_eq!(
            request.quantity,
            items.iter().map(|i| i.quantity).sum::<u32>()
        );
        assert!(items.iter().all(|i| skus.contains(&i.sku.as_str())));
        let mut named: Vec<&str> = items.iter().map(|i| i.sku.as_str()).collect();
        named.sort_unstable();
        named.dedup();
        assert_eq!(named.len(), items.len(), "a SKU twice in {items:?}");
        *shapes.entry((items.len(), request.quantity)).or_default() += 1;
        if let Some(key) = &request.key {
            let first = *by_key.entry(key).or_insert(items);
            assert_eq!(first, items, "{key} replays another bundle");
        }
    }
    for shape in [(1, 1), (1, 2), (2, 2), (3, 3)] {
        assert!(shapes.get(&shape).is_some_and(|&n| n > 100), "{shapes:?}");
    }
    // The same seed, the same bundles; the plain crowd names no SKU.
    let again = with_bundles(7, crowd(7), &skus);
    assert!(plan.iter().zip(&again).all(|(a, b)| a.items == b.items));
    assert!(crowd(7).iter().all(|r| r.items.is_none()));
}
