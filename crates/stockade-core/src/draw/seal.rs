//! The seed kept sealed until entries close: the store holds a random
//! [`Nonce`] and the commitment, never the seed nor anything it follows
//! from. The seed is `HMAC-SHA256(draw key, sale id ‖ nonce)` (the sale
//! id's UTF-8 bytes, then the nonce's 32 bytes), and the draw key is a
//! secret of the deployment's instances that the store does not hold. So
//! whoever reads the store while entries are open cannot compute the
//! draw's order, and cannot add entries until a chosen buyer wins.
//!
//! The commitment (SHA-256 of the seed) is fixed and published when the
//! sale is created; the instance that freezes the entry set derives the
//! seed again and refuses to draw unless it matches the commitment (an
//! instance with another key cannot make a different draw).

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::{DrawError, Seed};
use crate::SaleId;
use crate::redact::Secret;

/// The shortest draw key accepted, in bytes.
pub const MIN_DRAW_KEY: usize = 32;

/// The deployment's draw key: every instance must have the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrawKey(Secret<Vec<u8>>);

/// A draw's random nonce, kept in the store: with the key, it gives the
/// seed; without it, nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nonce([u8; 32]);

/// What the store keeps of a new draw's seed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The nonce the seed is derived from.
    pub nonce: Nonce,
    /// The seed's commitment ([`Seed::commitment`]), published at once.
    pub commitment: String,
}

impl DrawKey {
    /// A key of at least [`MIN_DRAW_KEY`] bytes.
    pub fn new(key: Vec<u8>) -> Result<Self, String> {
        if key.len() < MIN_DRAW_KEY {
            return Err(format!(
                "a draw key is at least {MIN_DRAW_KEY} bytes (for example 64 hex digits from `openssl rand -hex 32`); got {}",
                key.len()
            ));
        }
        Ok(Self(Secret::new(key)))
    }

    /// A random key (the embedded default's, kept in its data directory).
    pub fn random() -> Self {
        let bytes: [u8; 32] = crate::entropy::random();
        Self(Secret::new(hex::encode(bytes).into_bytes()))
    }

    /// The key's bytes, to keep it in a file.
    pub fn expose(&self) -> &[u8] {
        self.0.expose()
    }

    /// A new draw's sealed seed: a random nonce and the commitment.
    pub fn seal(&self, sale: &SaleId) -> Sealed {
        let nonce = Nonce(crate::entropy::random());
        Sealed {
            nonce,
            commitment: self.seed(sale, &nonce).commitment(),
        }
    }

    /// The seed of the draw of `sale` with `nonce`.
    pub fn seed(&self, sale: &SaleId, nonce: &Nonce) -> Seed {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.0.expose())
            .expect("HMAC takes a key of any length");
        mac.update(sale.as_str().as_bytes());
        mac.update(&nonce.0);
        Seed::from_bytes(mac.finalize().into_bytes().into())
    }

    /// The seed of the draw of `sale` with `nonce`, if it is the one
    /// `commitment` was made to: None when this key is not the one the
    /// sale was created with.
    pub fn unseal(&self, sale: &SaleId, nonce: &Nonce, commitment: &str) -> Option<Seed> {
        Some(self.seed(sale, nonce)).filter(|seed| seed.matches(commitment))
    }
}

impl Nonce {
    /// The nonce written as 64 hexadecimal digits.
    pub fn from_hex(text: &str) -> Result<Self, DrawError> {
        super::hex32(text).map(Self)
    }

    /// The nonce as 64 lowercase hexadecimal digits.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sale(id: &str) -> SaleId {
        SaleId::new(id).unwrap()
    }

    #[test]
    fn the_seed_follows_from_key_sale_and_nonce_and_matches_its_commitment() {
        let key = DrawKey::new(b"k".repeat(32)).unwrap();
        let sealed = key.seal(&sale("drop"));
        let seed = key.seed(&sale("drop"), &sealed.nonce);
        assert!(seed.matches(&sealed.commitment));
        assert_eq!(
            key.unseal(&sale("drop"), &sealed.nonce, &sealed.commitment),
            Some(seed.clone())
        );
        // Another key, another sale or another nonce: another seed.
        let other = DrawKey::new(b"x".repeat(32)).unwrap();
        assert_eq!(
            other.unseal(&sale("drop"), &sealed.nonce, &sealed.commitment),
            None
        );
        assert_ne!(key.seed(&sale("drop2"), &sealed.nonce), seed);
        assert_ne!(key.seal(&sale("drop")).nonce, sealed.nonce);
    }

    #[test]
    fn a_short_key_is_refused_and_a_nonce_reads_back() {
        let error = DrawKey::new(b"short".to_vec()).unwrap_err();
        assert!(error.contains("at least 32 bytes"), "{error}");
        assert_eq!(
            Nonce::from_hex(&Nonce([9; 32]).to_hex()).unwrap(),
            Nonce([9; 32])
        );
        assert!(Nonce::from_hex("xyz").is_err());
    }
}
