//! Admission tokens: `<payload>.<mac>`, both base64url without padding;
//! the payload is JSON `{"s": sale, "u": buyer, "t": ticket, "e": expiry
//! in ms}` and the mac its HMAC-SHA256 under the service's admission
//! secret. Checking one needs no Redis nor store: any instance that shares
//! the secret verifies it.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use stockade_core::{SaleId, UserId};

use super::TicketId;

type HmacSha256 = Hmac<Sha256>;

#[derive(Serialize, Deserialize)]
struct Claims {
    s: String,
    u: String,
    t: String,
    e: i64,
}

/// Why a token does not admit a purchase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not a token this service made, or altered.
    #[error("the Admission-Token is not one this service signed")]
    Forged,
    /// Past its expiry.
    #[error("the Admission-Token has expired")]
    Expired,
    /// Made for another buyer or another sale.
    #[error("the Admission-Token was issued to another buyer or for another sale")]
    WrongHolder,
}

/// Signs and checks admission tokens with one secret.
#[derive(Clone)]
pub struct AdmissionSigner {
    key: HmacSha256,
}

impl std::fmt::Debug for AdmissionSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdmissionSigner(<secret>)")
    }
}

impl AdmissionSigner {
    /// A signer over `secret`.
    pub fn new(secret: &[u8]) -> Self {
        Self {
            key: HmacSha256::new_from_slice(secret).expect("HMAC takes keys of any length"),
        }
    }

    /// The token admitting `user` to buy in `sale` until `until_ms`.
    /// Deterministic: every poll of an admitted ticket shows the same token.
    pub fn sign(&self, sale: &SaleId, user: &UserId, ticket: &TicketId, until_ms: i64) -> String {
        let claims = Claims {
            s: sale.to_string(),
            u: user.to_string(),
            t: ticket.to_string(),
            e: until_ms,
        };
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).expect("plain JSON"));
        let mut mac = self.key.clone();
        mac.update(payload.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{payload}.{tag}")
    }

    /// Checks `token` for a purchase by `user` in `sale` at `now_ms`, and
    /// answers the ticket it admits and when it expires (ms).
    pub fn verify(
        &self,
        token: &str,
        sale: &SaleId,
        user: &UserId,
        now_ms: i64,
    ) -> Result<(TicketId, i64), TokenError> {
        let (payload, tag) = token.trim().split_once('.').ok_or(TokenError::Forged)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| TokenError::Forged)?;
        let mut mac = self.key.clone();
        mac.update(payload.as_bytes());
        // Constant-time comparison.
        mac.verify_slice(&tag).map_err(|_| TokenError::Forged)?;
        let claims: Claims = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or(TokenError::Forged)?;
        if claims.s != sale.as_str() || claims.u != user.as_str() {
            return Err(TokenError::WrongHolder);
        }
        if now_ms >= claims.e {
            return Err(TokenError::Expired);
        }
        let ticket = TicketId::parse(&claims.t).map_err(|_| TokenError::Forged)?;
        Ok((ticket, claims.e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_admits_its_buyer_in_its_sale_until_it_expires() {
        let signer = AdmissionSigner::new(b"0123456789abcdef0123456789abcdef");
        let sale = SaleId::new("drop").unwrap();
        let other_sale = SaleId::new("drop-2").unwrap();
        let alice = UserId::new("alice").unwrap();
        let bob = UserId::new("bob").unwrap();
        let ticket = TicketId::generate(&sale);
        let token = signer.sign(&sale, &alice, &ticket, 10_000);
        assert_eq!(
            signer.verify(&token, &sale, &alice, 9_999),
            Ok((ticket, 10_000))
        );
        assert_eq!(
            signer.verify(&token, &sale, &alice, 10_000),
            Err(TokenError::Expired)
        );
        assert_eq!(
            signer.verify(&token, &sale, &bob, 0),
            Err(TokenError::WrongHolder)
        );
        assert_eq!(
            signer.verify(&token, &other_sale, &alice, 0),
            Err(TokenError::WrongHolder)
        );
        let other_key = AdmissionSigner::new(b"another secret, just as long....");
        assert_eq!(
            other_key.verify(&token, &sale, &alice, 0),
            Err(TokenError::Forged)
        );
        // A payload edited to extend the expiry no longer matches its mac.
        let (_, tag) = token.split_once('.').unwrap();
        let longer = signer.sign(&sale, &alice, &TicketId::generate(&sale), 99_999);
        let (payload, _) = longer.split_once('.').unwrap();
        assert_eq!(
            signer.verify(&format!("{payload}.{tag}"), &sale, &alice, 0),
            Err(TokenError::Forged)
        );
        for garbage in ["", ".", "abc", "a.b.c", "!!.!!"] {
            assert_eq!(
                signer.verify(garbage, &sale, &alice, 0),
                Err(TokenError::Forged)
            );
        }
    }
}
