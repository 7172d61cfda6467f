//! Queue tickets and admission tokens, both made and checked with the
//! service's admission secret.
//!
//! A ticket ([`TicketId`]) carries its place and buyer and a mac over
//! them. Admission tokens: `<payload>.<mac>`, both base64url without padding;
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

    /// The ticket of `user` at `place` in `sale`'s queue.
    pub fn mint_ticket(&self, sale: &SaleId, place: u64, user: &UserId) -> TicketId {
        let mac = self.ticket_mac(sale.as_str(), place, user.as_str());
        TicketId::from_parts(sale, place, user, &mac)
    }

    /// Whether this service minted `ticket` (constant-time): only a
    /// genuine ticket is put back at its place after its queue was lost.
    pub fn ticket_is_genuine(&self, ticket: &TicketId) -> bool {
        let Some(user) = ticket.user() else {
            return false;
        };
        let expected = self.ticket_mac(ticket.sale().as_str(), ticket.place(), user.as_str());
        subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), ticket.mac().as_bytes()).into()
    }

    /// 128 bits of the HMAC of a ticket's parts, as 32 hex digits. The
    /// leading `ticket` keeps ticket macs apart from token macs.
    fn ticket_mac(&self, sale: &str, place: u64, user: &str) -> String {
        let mut mac = self.key.clone();
        mac.update(format!("ticket\n{sale}\n{place}\n{user}").as_bytes());
        let bytes = mac.finalize().into_bytes();
        hex::encode(&bytes[..16])
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
        let ticket = signer.mint_ticket(&sale, 7, &alice);
        let token = signer.sign(&sale, &alice, &ticket, 10_000);
        assert_eq!(
            signer.verify(&token, &sale, &alice, 9_999),
            Ok((ticket.clone(), 10_000))
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
        let longer = signer.sign(&sale, &alice, &ticket, 99_999);
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

    #[test]
    fn tickets_carry_their_place_and_buyer_and_cannot_be_forged() {
        let signer = AdmissionSigner::new(b"0123456789abcdef0123456789abcdef");
        let sale = SaleId::new("drop-1").unwrap();
        let alice = UserId::new("alice@example.com").unwrap();
        let ticket = signer.mint_ticket(&sale, 1 << 41, &alice);
        let parsed = TicketId::parse(ticket.as_str()).unwrap();
        assert_eq!(parsed, ticket);
        assert_eq!(
            (parsed.sale(), parsed.place(), parsed.user().unwrap()),
            (sale.clone(), 1 << 41, alice.clone())
        );
        assert!(signer.ticket_is_genuine(&parsed));
        // Another place, buyer or secret: not one this service minted.
        let bob = UserId::new("bob").unwrap();
        let mac = ticket.mac().to_owned();
        for forged in [
            TicketId::from_parts(&sale, 1, &alice, &mac),
            TicketId::from_parts(&sale, 1 << 41, &bob, &mac),
        ] {
            assert!(!signer.ticket_is_genuine(&forged), "{forged}");
        }
        let other = AdmissionSigner::new(b"another secret, just as long....");
        assert!(!other.ticket_is_genuine(&ticket));
        // Well formed, but its buyer part is not UTF-8: not genuine (a
        // poll answers 404), never a parse error.
        let garbled = TicketId::parse(&format!(
            "drop-1.{:016x}.{}.{mac}",
            1u64 << 41,
            "0".repeat(171)
        ))
        .unwrap();
        assert_eq!(garbled.user(), None);
        assert!(!signer.ticket_is_genuine(&garbled));
        let longest = signer.mint_ticket(
            &SaleId::new("s".repeat(64)).unwrap(),
            u64::MAX,
            &UserId::new("ü".repeat(64)).unwrap(),
        );
        assert_eq!(longest.as_str().len(), TicketId::MAX_LEN);
        assert!(TicketId::parse(longest.as_str()).is_ok());
        for bad in [
            "",
            "drop-1",
            "drop-1.0123456789abcdef0123456789abcdef",
            "drop-1.00000000000000ff.YWxpY2U.0123456789abcdef0123456789abcde",
            "drop-1.00000000000000FF.YWxpY2U.0123456789abcdef0123456789abcdef",
            "drop-1.00000000000000ff.!!.0123456789abcdef0123456789abcdef",
            "drop-1.00000000000000ff.Y.0123456789abcdef0123456789abcdef",
            "a b.00000000000000ff.YWxpY2U.0123456789abcdef0123456789abcdef",
            "drop-1.00000000000000ff.YWxpY2U.0123456789abcdef0123456789abcdef.x",
        ] {
            assert!(TicketId::parse(bad).is_err(), "{bad:?}");
        }
    }
}
