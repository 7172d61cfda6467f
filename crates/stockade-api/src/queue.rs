//! Waiting rooms: joining the queue and a ticket as its holder sees it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use stockade_core::CloseReason;
use utoipa::ToSchema;

/// Where a queue ticket stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TicketStatus {
    /// In the queue: `position` and `estimated_wait_seconds` say how far.
    Waiting,
    /// Admitted: buy with `admission_token` before `admission_expires_at`.
    Admitted,
    /// Out of the queue for good: `closed_reason` says why.
    Closed,
}

/// `POST /v1/sales/{id}/queue`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JoinQueue {
    /// The buyer: 1 to 128 bytes. With identity on, the JWT's `sub` names
    /// the buyer: leave it out or repeat it.
    #[schema(nullable = false, min_length = 1, max_length = 128)]
    pub user_id: Option<String>,
}

/// A queue ticket and where it stands.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct QueueTicket {
    /// The ticket: poll it at `GET /v1/queue/{ticket}`.
    pub ticket: String,
    /// The sale.
    pub sale_id: String,
    /// Where the ticket stands.
    pub status: TicketStatus,
    /// Place in the queue while waiting (1 is next). Before the sale
    /// starts it is provisional: early joiners are put in a random order
    /// at the start.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// Seconds until admission at the room's rate, while waiting (it can
    /// be longer when admission waits for stock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_wait_seconds: Option<u64>,
    /// When admitted: send it as the `Admission-Token` header of the purchase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_token: Option<String>,
    /// When admitted: when the token expires.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admission_expires_at: Option<DateTime<Utc>>,
    /// When closed: why.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "sold_out")]
    pub closed_reason: Option<CloseReason>,
}
