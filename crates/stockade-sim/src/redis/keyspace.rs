//! The data set: keys, their values and their deadlines, and the log of
//! write effects a lagging replica is built from.
//!
//! Orders follow Redis where replies show them: keys and set members are
//! kept sorted (KEYS and SMEMBERS are unordered in Redis, so any order is
//! one Redis could give), hash fields in insertion order (what a small,
//! listpack-encoded Redis hash answers), sorted sets by score then member.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use indexmap::IndexMap;

use super::resp::Reply;

/// The error Redis gives for a command on a key of another type.
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// One key's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string (numbers are strings too).
    Str(Vec<u8>),
    /// A hash, fields in insertion order.
    Hash(IndexMap<Vec<u8>, Vec<u8>>),
    /// A list.
    List(VecDeque<Vec<u8>>),
    /// A set.
    Set(BTreeSet<Vec<u8>>),
    /// A sorted set.
    ZSet(ZSet),
    /// A stream.
    Stream(Stream),
}

impl Value {
    /// What TYPE answers.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Str(_) => "string",
            Self::Hash(_) => "hash",
            Self::List(_) => "list",
            Self::Set(_) => "set",
            Self::ZSet(_) => "zset",
            Self::Stream(_) => "stream",
        }
    }

    /// An aggregate left empty, which Redis deletes (streams stay).
    fn is_empty_aggregate(&self) -> bool {
        match self {
            Self::Hash(h) => h.is_empty(),
            Self::List(l) => l.is_empty(),
            Self::Set(s) => s.is_empty(),
            Self::ZSet(z) => z.is_empty(),
            Self::Str(_) | Self::Stream(_) => false,
        }
    }
}

/// A sorted set: members by score, and each member's score.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ZSet {
    by_member: BTreeMap<Vec<u8>, f64>,
    by_score: BTreeSet<(Score, Vec<u8>)>,
}

/// A score ordered as Redis orders them (sorted sets hold no NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}
impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Score {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl ZSet {
    /// Sets `member`'s score; whether it was new.
    pub fn insert(&mut self, member: Vec<u8>, score: f64) -> bool {
        let old = self.by_member.insert(member.clone(), score);
        if let Some(old) = old {
            self.by_score.remove(&(Score(old), member.clone()));
        }
        self.by_score.insert((Score(score), member));
        old.is_none()
    }

    /// Removes `member`; whether it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.by_member.remove(member) {
            Some(score) => self.by_score.remove(&(Score(score), member.to_vec())),
            None => false,
        }
    }

    /// `member`'s score.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.by_member.get(member).copied()
    }

    /// Members, lowest score first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&[u8], f64)> {
        self.by_score.iter().map(|(s, m)| (m.as_slice(), s.0))
    }

    /// How many members.
    pub fn len(&self) -> usize {
        self.by_member.len()
    }

    /// Whether it has no member.
    pub fn is_empty(&self) -> bool {
        self.by_member.is_empty()
    }
}

/// A stream entry's id: milliseconds, then a sequence number.
pub type StreamId = (u64, u64);
/// A stream entry's fields and values, in order.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// A stream: entries by id, and the last id given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stream {
    /// Entries, oldest first.
    pub entries: BTreeMap<StreamId, Fields>,
    /// The greatest id ever added (XADD never goes below it).
    pub last_id: StreamId,
}

/// A key's value and its deadline (unix ms).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The value.
    pub value: Value,
    /// When it expires, if it does.
    pub expires_at: Option<i64>,
}

/// The keyspace of the one database the simulated server has.
#[derive(Debug, Default)]
pub struct Db {
    entries: BTreeMap<Vec<u8>, Entry>,
    /// The time the running command sees (fixed for a whole script).
    pub now_ms: i64,
    /// Microseconds of the same instant, for TIME.
    pub now_us: i64,
    /// Keys found expired, not yet written to the log as DEL.
    pub expired: Vec<Vec<u8>>,
}

impl Db {
    /// The live entry of `key`, deleting it first if it expired.
    pub fn entry(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let expired = self
            .entries
            .get(key)
            .and_then(|e| e.expires_at)
            .is_some_and(|at| at <= self.now_ms);
        if expired {
            self.entries.remove(key);
            self.expired.push(key.to_vec());
            return None;
        }
        self.entries.get_mut(key)
    }

    /// The live value of `key`.
    pub fn get(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.entry(key).map(|e| &mut e.value)
    }

    /// Whether `key` exists.
    pub fn exists(&mut self, key: &[u8]) -> bool {
        self.entry(key).is_some()
    }

    /// Sets `key` to `value` with no deadline (SET's default).
    pub fn set(&mut self, key: &[u8], value: Value) {
        self.entries.insert(
            key.to_vec(),
            Entry {
                value,
                expires_at: None,
            },
        );
    }

    /// Deletes `key`; whether it was live.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        let live = self.exists(key);
        self.entries.remove(key);
        live
    }

    /// Deletes every key.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// How many keys are held, expired ones not yet deleted included.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many keys have a deadline.
    pub fn expiring(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.expires_at.is_some())
            .count()
    }

    /// Every live key, sorted.
    pub fn keys(&mut self) -> Vec<Vec<u8>> {
        self.sweep();
        self.entries.keys().cloned().collect()
    }

    /// Every live entry, by key (for comparisons in tests).
    pub fn dump(&mut self) -> BTreeMap<Vec<u8>, Entry> {
        self.sweep();
        self.entries.clone()
    }

    /// Deletes every expired key (Redis's active expiry, done at once).
    pub fn sweep(&mut self) {
        let now = self.now_ms;
        let dead: Vec<Vec<u8>> = self
            .entries
            .iter()
            .filter(|(_, e)| e.expires_at.is_some_and(|at| at <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in dead {
            self.entries.remove(&key);
            self.expired.push(key);
        }
    }

    /// Deletes `key` if a command left its aggregate empty.
    pub fn drop_if_empty(&mut self, key: &[u8]) {
        if self
            .entries
            .get(key)
            .is_some_and(|e| e.value.is_empty_aggregate())
        {
            self.entries.remove(key);
        }
    }

    /// The value of `key` as `T` through `pick` (None: no such key);
    /// WRONGTYPE for a key of another type.
    pub fn typed<T>(
        &mut self,
        key: &[u8],
        pick: impl FnOnce(&mut Value) -> Option<&mut T>,
    ) -> Result<Option<&mut T>, Reply> {
        match self.get(key) {
            None => Ok(None),
            Some(value) => pick(value).map(Some).ok_or_else(|| Reply::error(WRONGTYPE)),
        }
    }

    /// Like [`Db::typed`], creating the key with `empty` when missing.
    pub fn typed_or_insert<T>(
        &mut self,
        key: &[u8],
        empty: Value,
        pick: impl Fn(&mut Value) -> Option<&mut T>,
    ) -> Result<&mut T, Reply> {
        if !self.exists(key) {
            self.set(key, empty);
        }
        let value = self.get(key).expect("the key was just made");
        pick(value).ok_or_else(|| Reply::error(WRONGTYPE))
    }
}

/// Pickers for [`Db::typed`].
pub mod pick {
    use super::*;

    /// A string.
    pub fn string(v: &mut Value) -> Option<&mut Vec<u8>> {
        if let Value::Str(s) = v { Some(s) } else { None }
    }
    /// A hash.
    pub fn hash(v: &mut Value) -> Option<&mut IndexMap<Vec<u8>, Vec<u8>>> {
        if let Value::Hash(h) = v {
            Some(h)
        } else {
            None
        }
    }
    /// A list.
    pub fn list(v: &mut Value) -> Option<&mut VecDeque<Vec<u8>>> {
        if let Value::List(l) = v {
            Some(l)
        } else {
            None
        }
    }
    /// A set.
    pub fn set(v: &mut Value) -> Option<&mut BTreeSet<Vec<u8>>> {
        if let Value::Set(s) = v { Some(s) } else { None }
    }
    /// A sorted set.
    pub fn zset(v: &mut Value) -> Option<&mut ZSet> {
        if let Value::ZSet(z) = v {
            Some(z)
        } else {
            None
        }
    }
    /// A stream.
    pub fn stream(v: &mut Value) -> Option<&mut Stream> {
        if let Value::Stream(s) = v {
            Some(s)
        } else {
            None
        }
    }
}
