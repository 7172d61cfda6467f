//! Bearer credentials: reading `Authorization: Bearer <token>`, and the
//! one comparison of a presented token with a configured one. Both are
//! hashed to SHA-256 and the digests compared with `subtle`, so neither the
//! time taken nor an early exit reveals a prefix or the length of the
//! secret. Used by the API's operator routes and by the listener's
//! per-client connection cap (which lets the admin through).

use axum::http::{HeaderMap, header};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The token of `Authorization: Bearer <token>`, if the header has that form.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Whether `presented` is `secret`, in time independent of both.
pub fn secrets_match(presented: &[u8], secret: &[u8]) -> bool {
    let presented = Sha256::digest(presented);
    let secret = Sha256::digest(secret);
    presented.ct_eq(&secret).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_match_only_themselves_whatever_their_length() {
        assert!(secrets_match(b"a-secret-token", b"a-secret-token"));
        assert!(!secrets_match(b"a-secret-token", b"a-secret-tokeN"));
        assert!(!secrets_match(b"a-secret", b"a-secret-token"));
        assert!(!secrets_match(b"", b"a-secret-token"));
    }

    #[test]
    fn bearer_reads_only_the_bearer_scheme() {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, "Bearer  abc ".parse().unwrap());
        assert_eq!(bearer(&headers), Some("abc"));
        headers.insert(header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&headers), None);
    }
}
