//! Where a sale lives in Redis.
//!
//! Every key of one sale carries the sale id as its `{hash tag}`, so on
//! Redis Cluster they all map to one slot and one script can touch them all.
//! The sale id alphabet (`A-Za-z0-9_-`) cannot contain braces, so the tag is
//! always exactly the id.

use stockade_core::SaleId;

/// The keys of one sale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaleKeys {
    /// Hash: `total`, `limit`, `starts`, `ends`, `hold`, `remaining`.
    pub sale: String,
    /// Hash: user id → items held by live orders (holders only).
    pub holdings: String,
    /// Hash: idempotency key → order id.
    pub keys: String,
    /// Hash: order id → `quantity:state:user id` (state `l` live, `r` released).
    pub orders: String,
    /// Stream: the outbox, one entry per purchase batch that accepted an
    /// order, until every order in it is decided in the store.
    pub outbox: String,
}

impl SaleKeys {
    /// All five, in the order the scripts that take them all expect
    /// (`KEYS[1..5]`: sale, holdings, keys, orders, outbox).
    pub fn all(&self) -> [&str; 5] {
        [
            &self.sale,
            &self.holdings,
            &self.keys,
            &self.orders,
            &self.outbox,
        ]
    }

    /// The keys of `sale` under `prefix` (for example `stockade:`).
    pub fn new(prefix: &str, sale: &SaleId) -> Self {
        Self::tagged(prefix, sale.as_str())
    }

    /// The keys under hash tag `tag`: a sale's own (the sale id), or one of
    /// its other shards' (see `shards::placement`).
    pub(super) fn tagged(prefix: &str, tag: &str) -> Self {
        let base = format!("{prefix}{{{tag}}}");
        Self {
            sale: format!("{base}:sale"),
            holdings: format!("{base}:holdings"),
            keys: format!("{base}:keys"),
            orders: format!("{base}:orders"),
            outbox: format!("{base}:outbox"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_keys_share_the_sale_hash_tag() {
        let keys = SaleKeys::new("stockade:", &SaleId::new("drop-1").unwrap());
        for key in [
            &keys.sale,
            &keys.holdings,
            &keys.keys,
            &keys.orders,
            &keys.outbox,
        ] {
            assert!(key.starts_with("stockade:{drop-1}:"), "{key}");
        }
        assert_eq!(keys.sale, "stockade:{drop-1}:sale");
    }
}
