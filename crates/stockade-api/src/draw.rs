//! Draw sales: how a sale allocates its stock, an entry, and the draw as
//! it is published.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use stockade_core::draw::EntryResult;
use utoipa::ToSchema;

use crate::ItemBody;

/// How a sale allocates its stock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Allocation {
    /// To whoever buys first.
    #[default]
    Race,
    /// By a draw among the entries of a window.
    Draw,
}

/// A draw sale's entry window and the commitment to its seed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DrawTerms {
    /// When entries open.
    pub entries_open_at: DateTime<Utc>,
    /// When entries close and the draw is made (within 5 s).
    pub entries_close_at: DateTime<Utc>,
    /// The hex SHA-256 of the draw's secret seed, published before the
    /// first entry; the seed itself is published with the draw.
    pub seed_commitment: String,
}

/// `POST /v1/sales/{id}/entries`.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EntryRequest {
    /// The buyer (with identity off; with a JWT it is the token's `sub`),
    /// as a purchase's `user_id`.
    #[schema(
        nullable = false,
        min_length = 1,
        max_length = 128,
        pattern = r"^[^\s\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF](?:[^\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF]*[^\s\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF])?$"
    )]
    pub user_id: Option<String>,
    /// The SKU wanted (may be left out on a sale of one SKU).
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")]
    pub sku: Option<String>,
    /// Items wanted (default 1), within the buyer's per-user limit.
    #[schema(minimum = 1, maximum = 1_000_000_000, default = 1)]
    pub quantity: Option<u32>,
    /// The buyer's tier, identity off only (as for a purchase).
    #[schema(min_length = 1, max_length = 32, pattern = r"^[A-Za-z0-9_-]+$")]
    pub tier: Option<String>,
}

/// An entry in a draw, as its buyer sees it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EntryBody {
    /// The entry's random id (the published draw lists entries by it).
    pub entry_id: String,
    /// The sale.
    pub sale_id: String,
    /// The buyer.
    pub user_id: String,
    /// What the entry would buy.
    pub items: Vec<ItemBody>,
    /// `entered` (before the draw), `won` (with `order_id`), `waitlisted`
    /// (an unpaid hold may roll down to it) or `lost`.
    #[schema(value_type = String, example = "entered")]
    pub result: EntryResult,
    /// Its place in the draw's order (0 first), once drawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    /// The order it won.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = Uuid)]
    pub order_id: Option<String>,
    /// When the buyer entered.
    pub created_at: DateTime<Utc>,
}

/// `GET /v1/sales/{id}/draw`: everything needed to recompute the draw.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DrawBody {
    /// The sale.
    pub sale_id: String,
    /// `entries_open`, `entries_closed` (the draw is being made), `drawn`
    /// (holds may still roll down) or `settled`.
    pub state: String,
    /// When entries open and close, and the commitment to the seed.
    #[serde(flatten)]
    pub terms: DrawTerms,
    /// How many entries there are.
    pub entry_count: u64,
    /// The seed, hex, once drawn: its SHA-256 is `seed_commitment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// When the draw's purchases were recorded (store clock): they were
    /// made between `entries_close_at` and this instant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_at: Option<DateTime<Utc>>,
    /// The digest of the frozen entry set, once frozen: the SHA-256, hex,
    /// of the entry ids sorted by their bytes, each followed by a newline
    /// (docs/api.md, "Draw sales"). `order` lists exactly that set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry_digest: Option<String>,
    /// The entries in the draw's order, once drawn: recompute it with the
    /// seed (docs/api.md, "Draw sales"; `scripts/verify-draw`).
    /// A page of them (`?after=&limit=`, 1000 by default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<DrawnEntry>,
    /// The place of the page's last entry when more may follow: ask again
    /// with `?after=` it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u32>,
}

/// One entry of a published draw.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DrawnEntry {
    /// The entry's id (random: it names no buyer).
    pub entry_id: String,
    /// What the entry asked for: with the sale's stock, what an auditor
    /// needs to recompute the winners, not only the order.
    pub items: Vec<ItemBody>,
    /// The tier the entry was made in, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
    /// Where it stands now.
    #[schema(value_type = String, example = "won")]
    pub result: EntryResult,
    /// What the draw gave it, before any roll-down: `won`, `waitlisted`
    /// or `lost` (absent from draws made before it was kept). The draw's
    /// winners are recomputed from it (`scripts/verify-draw`); `result`
    /// differs when a winner lapsed (won, now lost) or a hold rolled down
    /// to it (waitlisted, now won).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "won")]
    pub drawn_result: Option<EntryResult>,
}
