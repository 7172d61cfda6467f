//! Orders: accepted purchases with a time-ordered unique id.

use std::fmt;
use std::str::FromStr;

use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{Epoch, IdempotencyKey, Item, Purchase, SaleId, TierName, UserId, ValidationError};

/// A time-ordered unique order id (UUIDv7): sorting ids sorts orders by the
/// millisecond they were accepted, which keeps store indexes append-only.
/// The 74 bits after the timestamp are random, so an order id cannot be
/// guessed from another one or from the time of a sale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OrderId(Uuid);

impl OrderId {
    /// A new id for an order accepted now: the Unix time in milliseconds,
    /// then 74 random bits (RFC 9562 UUIDv7 without a counter).
    ///
    /// Not `Uuid::now_v7`: for ordering within a millisecond it fills 42 of
    /// those bits with a counter that is reseeded each millisecond and then
    /// incremented, which leaves 32 bits to guess for an id minted next to
    /// a known one. Ids minted in the same millisecond are in random order.
    pub fn generate() -> Self {
        Self(crate::entropy::uuid_v7())
    }

    /// Wraps an existing UUID (from the store or an engine reply).
    pub fn from_uuid(uuid: Uuid) -> Self {
        Self(uuid)
    }

    /// The underlying UUID.
    pub fn as_uuid(&self) -> Uuid {
        self.0
    }
}

impl fmt::Display for OrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl FromStr for OrderId {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Only the hyphenated form ids are shown in (what `format: uuid`
        // means), not the braced, URN or bare-hex spellings.
        let hyphenated = s.len() == 36 && [8, 13, 18, 23].iter().all(|&i| s.as_bytes()[i] == b'-');
        if !hyphenated {
            return Err(ValidationError::new(
                "order_id",
                "is not a UUID like 0193a5b2-7c1d-7e4f-8a9b-0c1d2e3f4a5b",
            ));
        }
        Uuid::parse_str(s)
            .map(Self)
            .map_err(|e| ValidationError::new("order_id", format!("is not a UUID: {e}")))
    }
}

/// Where an order is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Sold for good (paid, or of a sale without a payment hold).
    Confirmed,
    /// Reserved, awaiting payment (`POST /v1/orders/{id}/confirm`) until its
    /// `expires_at`; it holds its items meanwhile.
    Held,
    /// Cancelled: its items went back to stock.
    Cancelled,
    /// Its hold passed unpaid: its items went back to stock.
    Expired,
}

impl OrderStatus {
    /// Whether the order still holds its items (counts against stock and the
    /// buyer's limit).
    pub fn holds_stock(self) -> bool {
        matches!(self, Self::Confirmed | Self::Held)
    }

    /// The name used in storage and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmed",
            Self::Held => "held",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }
}

impl FromStr for OrderStatus {
    type Err = ValidationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "confirmed" => Ok(Self::Confirmed),
            "held" => Ok(Self::Held),
            "cancelled" => Ok(Self::Cancelled),
            "expired" => Ok(Self::Expired),
            other => Err(ValidationError::new(
                "status",
                format!("unknown order status {other:?}"),
            )),
        }
    }
}

/// An order as the store records it: the input to [`crate::Engine::rebuild`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The order id.
    pub id: OrderId,
    /// The sale it was bought from.
    pub sale_id: SaleId,
    /// The buyer.
    pub user_id: UserId,
    /// Items bought, across every SKU: the sum of `items`.
    pub quantity: u32,
    /// What was bought: a quantity of each SKU, in the order asked.
    pub items: Vec<Item>,
    /// The buyer's tier, when it is one of the sale's: the order's items
    /// count against its reserve first.
    pub tier: Option<TierName>,
    /// The key the purchase was made with, if any.
    pub idempotency_key: Option<IdempotencyKey>,
    /// Where the order is in its life.
    pub status: OrderStatus,
    /// When the engine accepted it.
    pub created_at: DateTime<Utc>,
    /// For an order of a sale with a payment hold: the instant its hold
    /// runs out unless confirmed (`created_at` + the sale's hold). Kept
    /// once the order is confirmed, cancelled or expired, for the record.
    pub expires_at: Option<DateTime<Utc>>,
    /// The sale's epoch the engine decided it under: the store commits it
    /// only while that is still the sale's epoch.
    pub epoch: Epoch,
}

impl Order {
    /// The order an accepted purchase makes (`items` and `tier`: the
    /// purchase's as the sale resolved them), decided under the purchase's
    /// epoch: confirmed, until [`Order::under_hold`] applies the sale's
    /// payment hold (the store does, when it commits the order, because
    /// only the sale's spec says whether it holds).
    ///
    /// `created_at` is kept to the millisecond, the precision every store
    /// and engine records, so the answer to the purchase, a later read and
    /// a replay all show the same instant.
    pub fn accepted(
        purchase: &Purchase,
        items: Vec<Item>,
        tier: Option<TierName>,
        id: OrderId,
        created_at: DateTime<Utc>,
    ) -> Self {
        use chrono::SubsecRound;
        let created_at = created_at.trunc_subsecs(3);
        Self {
            id,
            sale_id: purchase.sale_id().clone(),
            user_id: purchase.user_id().clone(),
            quantity: purchase.quantity(),
            items,
            tier,
            idempotency_key: purchase.idempotency_key().cloned(),
            status: OrderStatus::Confirmed,
            created_at,
            expires_at: None,
            epoch: purchase.epoch(),
        }
    }

    /// This newly accepted order under the sale's payment hold:
    /// [`Order::terms_under_hold`] applied.
    pub fn under_hold(self, hold: Option<Duration>) -> Self {
        let (status, expires_at) = Self::terms_under_hold(self.created_at, hold);
        Self {
            status,
            expires_at,
            ..self
        }
    }

    /// The status and deadline of an order accepted at `created_at` in a
    /// sale with payment hold `hold`: `held` until `created_at + hold` (to
    /// the millisecond, as every store keeps instants) when the sale has
    /// one, `confirmed` at once when it has none.
    pub fn terms_under_hold(
        created_at: DateTime<Utc>,
        hold: Option<Duration>,
    ) -> (OrderStatus, Option<DateTime<Utc>>) {
        match hold {
            Some(hold) => {
                let accepted = created_at
                    .duration_trunc(TimeDelta::milliseconds(1))
                    .unwrap_or(created_at);
                let hold = TimeDelta::from_std(hold).unwrap_or(TimeDelta::MAX);
                (OrderStatus::Held, Some(accepted + hold))
            }
            None => (OrderStatus::Confirmed, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_sort_by_the_millisecond_of_creation() {
        let mut ids = Vec::new();
        for _ in 0..20 {
            ids.push(OrderId::generate());
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        let (seconds, _) = ids[0].as_uuid().get_timestamp().unwrap().to_unix();
        let now = chrono::Utc::now().timestamp() as u64;
        assert!(now.abs_diff(seconds) < 60, "{seconds} vs {now}");
    }

    /// The 12 bits of `rand_a` and the 62 of `rand_b`, as one number.
    fn random_bits(id: OrderId) -> u128 {
        let value = id.as_uuid().as_u128();
        let rand_a = (value >> 64) & 0xFFF;
        let rand_b = value & ((1u128 << 62) - 1);
        (rand_a << 62) | rand_b
    }

    #[test]
    fn order_ids_carry_74_random_bits() {
        // Ids minted back to back (mostly in the same millisecond) must not
        // be guessable from each other: each of the 74 bits is set about
        // half the time, and none repeats as a whole.
        let n = 4_000;
        let bits: Vec<u128> = (0..n).map(|_| random_bits(OrderId::generate())).collect();
        for position in 0..74 {
            let ones = bits.iter().filter(|b| (*b >> position) & 1 == 1).count();
            assert!(
                (n * 2 / 5..=n * 3 / 5).contains(&ones),
                "bit {position} of the random part was set {ones} times in {n} ids"
            );
        }
        let distinct: std::collections::HashSet<u128> = bits.iter().copied().collect();
        assert_eq!(distinct.len(), n);
        assert_eq!(OrderId::generate().as_uuid().get_version_num(), 7);
    }

    #[test]
    fn order_ids_round_trip_through_text() {
        let id = OrderId::generate();
        assert_eq!(id.to_string().parse::<OrderId>().unwrap(), id);
        assert_eq!("nope".parse::<OrderId>().unwrap_err().field, "order_id");
        let bare = id.as_uuid().simple().to_string();
        assert!(bare.parse::<OrderId>().is_err(), "{bare}");
        let braced = id.as_uuid().braced().to_string();
        assert!(braced.parse::<OrderId>().is_err(), "{braced}");
        let upper = id.to_string().to_uppercase();
        assert_eq!(upper.parse::<OrderId>().unwrap(), id);
    }

    #[test]
    fn statuses_round_trip() {
        for s in [
            OrderStatus::Confirmed,
            OrderStatus::Held,
            OrderStatus::Cancelled,
            OrderStatus::Expired,
        ] {
            assert_eq!(s.as_str().parse::<OrderStatus>().unwrap(), s);
        }
        assert!(!OrderStatus::Cancelled.holds_stock());
        assert!(OrderStatus::Held.holds_stock());
    }
}
