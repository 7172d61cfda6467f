//! The draw of a draw sale: a fair order of its entries that anyone can
//! recompute and nobody, the service included, can choose.
//!
//! When a draw sale is created the service fixes a [`Seed`], sealed (see
//! [`seal`]: the store keeps a nonce, the seed needs the deployment's draw
//! key too), and publishes only its [`Seed::commitment`], the SHA-256 of
//! the seed's 32 bytes. When entries close it orders the entries with [`draw_order`] and
//! publishes the seed beside the ordered list: anyone can check that the
//! seed matches the commitment made before the first entry, and compute
//! the order again from the seed and the entry ids.
//!
//! # The order, precisely
//! So that it can be recomputed in any language (`scripts/verify-draw`
//! does it in Python's standard library alone):
//!
//! 1. Sort the entry ids by their UTF-8 bytes, ascending. Ids are unique.
//! 2. The stream: the ChaCha20 keystream (RFC 8439's block function, 20
//!    rounds) keyed with the seed's 32 bytes, all-zero nonce, block
//!    counter from 0, read as consecutive little-endian 64-bit words.
//! 3. Shuffle (Fisher–Yates, from the end): for `i` from `n - 1` down to
//!    `1`, draw `j` uniformly in `0..=i` and swap positions `i` and `j`.
//!    To draw `j`: let `bound = i + 1` and `zone = 2^64 - (2^64 mod
//!    bound)`; take the next word `w`, and the next again while
//!    `w >= zone`; then `j = w mod bound`.
//!
//! The first entries of the result win, as far as the stock goes; the
//! rest wait in that order for an unpaid hold to roll down to them.
//!
//! # The entry set's digest
//! The draw is made from a frozen set of entries, and its
//! [`entry_digest`] is published with it: the SHA-256 of the entry ids
//! sorted by their UTF-8 bytes, each followed by a newline (`\n`), as 64
//! lowercase hexadecimal digits. An auditor given the list of entries
//! checks it against the digest before recomputing the order.
//!
//! - `entry`: a draw sale's settings ([`DrawConfig`]), entry ids and
//!   where an entry stands ([`EntryResult`]).
//! - [`seal`]: the seed derived from the draw key and a stored nonce, so
//!   the store alone never holds it before entries close.

mod entry;
pub mod seal;

pub use entry::{DrawConfig, EntryId, EntryResult};
pub use seal::{DrawKey, Nonce, Sealed};

use rand_chacha::ChaCha20Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

/// Why a draw could not be made or checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DrawError {
    /// A seed given as text is not 64 hexadecimal digits.
    #[error("a draw seed is 64 hexadecimal digits (32 bytes); got {0:?}")]
    InvalidSeed(String),
    /// The same entry id twice: every entry must be drawn once.
    #[error("entry {0:?} appears twice; each entry id is drawn once")]
    DuplicateEntry(String),
}

/// The secret a draw is made from: 32 random bytes, published (with
/// [`Seed::to_hex`]) only once the draw is made.
#[derive(Clone, PartialEq, Eq)]
pub struct Seed([u8; 32]);

impl std::fmt::Debug for Seed {
    /// Never the seed itself: it is secret until the draw.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Seed(commitment {})", self.commitment())
    }
}

impl Seed {
    /// A seed from the operating system's random source.
    pub fn random() -> Self {
        let mut bytes = [0u8; 32];
        crate::entropy::fill(&mut bytes);
        Self(bytes)
    }

    /// The seed with these bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// The seed written as 64 hexadecimal digits (either case).
    pub fn from_hex(text: &str) -> Result<Self, DrawError> {
        hex32(text).map(Self)
    }

    /// The seed as 64 lowercase hexadecimal digits: what is published
    /// once the draw is made.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The commitment published before the draw: the SHA-256 of the seed's
    /// 32 bytes, as 64 lowercase hexadecimal digits.
    pub fn commitment(&self) -> String {
        hex::encode(Sha256::digest(self.0))
    }

    /// Whether this seed is the one `commitment` was made to (either case).
    pub fn matches(&self, commitment: &str) -> bool {
        self.commitment().eq_ignore_ascii_case(commitment)
    }

    /// The stream of step 2 of the module's description.
    fn stream(&self) -> ChaCha20Rng {
        ChaCha20Rng::from_seed(self.0)
    }
}

/// The entry ids in draw order (see the module's description): the
/// winners first.
pub fn draw_order<S: AsRef<str>>(
    seed: &Seed,
    entries: impl IntoIterator<Item = S>,
) -> Result<Vec<String>, DrawError> {
    let mut order: Vec<String> = entries
        .into_iter()
        .map(|id| id.as_ref().to_owned())
        .collect();
    order.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    if let Some(pair) = order.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(DrawError::DuplicateEntry(pair[0].clone()));
    }
    let mut stream = seed.stream();
    for i in (1..order.len()).rev() {
        let j = uniform_up_to(&mut stream, i as u64);
        order.swap(i, j as usize);
    }
    Ok(order)
}

/// The digest of an entry set (see the module's description): the same
/// for the same ids in any order.
pub fn entry_digest<S: AsRef<str>>(entries: impl IntoIterator<Item = S>) -> String {
    let mut ids: Vec<S> = entries.into_iter().collect();
    ids.sort_unstable_by(|a, b| a.as_ref().as_bytes().cmp(b.as_ref().as_bytes()));
    let mut hasher = Sha256::new();
    for id in &ids {
        hasher.update(id.as_ref().as_bytes());
        hasher.update(b"\n");
    }
    hex::encode(hasher.finalize())
}

/// A uniform draw in `0..=top` from the stream, by rejection (step 3).
fn uniform_up_to(stream: &mut ChaCha20Rng, top: u64) -> u64 {
    let bound = top + 1;
    // 2^64 mod bound, computed in u64: (2^64 - bound) mod bound.
    let excess = bound.wrapping_neg() % bound;
    let zone = 0u64.wrapping_sub(excess);
    loop {
        let word = stream.next_u64();
        // zone is 0 (meaning 2^64) when bound divides 2^64: every word fits.
        if zone == 0 || word < zone {
            return word % bound;
        }
    }
}

/// 32 bytes written as 64 hexadecimal digits (either case): a seed or a
/// nonce.
fn hex32(text: &str) -> Result<[u8; 32], DrawError> {
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(text, &mut bytes)
        .map_err(|_| DrawError::InvalidSeed(text.chars().take(80).collect()))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests;
