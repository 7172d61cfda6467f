//! What a call sends, and the answers it reads.

use http::StatusCode;
use serde::{Deserialize, Serialize};

use stockade_api::ErrorCode;

/// A 2xx answer whose status says more than its body: a purchase (201
/// committed, 200 replayed, 202 pending), a sale created (201) or found
/// identical (200), a ticket new (201) or joined before (200).
#[derive(Debug)]
pub struct Reply<T> {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub body: T,
}

/// A purchase answered briefly ([`Client::purchase_brief`](super::Client::purchase_brief)): the status
/// and either the 2xx body read as `T` or the error code, without the
/// message or `Retry-After`.
#[derive(Debug)]
pub struct Brief<T> {
    /// The status.
    pub status: StatusCode,
    /// The 2xx body, or the error answer's code.
    pub outcome: Result<T, ErrorCode>,
}

/// The least of a purchase's 2xx body: the order id. Read as the `T` of
/// [`Client::purchase_brief`](super::Client::purchase_brief), it costs one string.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OrderRef {
    /// The order.
    pub order_id: String,
}

/// What a purchase sends: the buyer and quantity of the body, and the
/// `Idempotency-Key`, `Admission-Token` and `Prefer: respond-async`
/// headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Purchase<'a> {
    /// The body's `user_id`; None leaves it out (the JWT's `sub` buys).
    pub user_id: Option<&'a str>,
    /// Items to buy.
    pub quantity: u32,
    /// The SKU (None: the sale's only one).
    pub sku: Option<&'a str>,
    /// The `Idempotency-Key` header.
    pub idempotency_key: Option<&'a str>,
    /// The `Admission-Token` header (a sale with a waiting room).
    pub admission_token: Option<&'a str>,
    /// Send `Prefer: respond-async` (answered 202 `pending` once the
    /// engine took it).
    pub respond_async: bool,
}

impl<'a> Purchase<'a> {
    /// One item for `user_id`.
    pub fn by(user_id: &'a str) -> Self {
        Self {
            user_id: Some(user_id),
            ..Self::as_caller()
        }
    }

    /// One item for the buyer the bearer token names (no `user_id`).
    pub fn as_caller() -> Self {
        Self {
            user_id: None,
            quantity: 1,
            sku: None,
            idempotency_key: None,
            admission_token: None,
            respond_async: false,
        }
    }

    /// `quantity` items.
    pub fn quantity(mut self, quantity: u32) -> Self {
        self.quantity = quantity;
        self
    }

    /// Of the SKU `sku` (a sale of several SKUs needs one named).
    pub fn sku(mut self, sku: &'a str) -> Self {
        self.sku = Some(sku);
        self
    }

    /// With an `Idempotency-Key`: a retry returns the same order.
    pub fn idempotency_key(mut self, key: &'a str) -> Self {
        self.idempotency_key = Some(key);
        self
    }

    /// With the admission token of an admitted queue ticket.
    pub fn admission_token(mut self, token: &'a str) -> Self {
        self.admission_token = Some(token);
        self
    }

    /// Answered as soon as the engine took it (202 `pending`).
    pub fn respond_async(mut self) -> Self {
        self.respond_async = true;
        self
    }
}

/// The purchase body, serialized straight from borrowed strings.
#[derive(Serialize)]
pub(super) struct PurchaseBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) user_id: Option<&'a str>,
    pub(super) quantity: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) sku: Option<&'a str>,
}

/// The join body.
#[derive(Serialize)]
pub(super) struct JoinBody<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) user_id: Option<&'a str>,
}

/// Only the code of an error body (the message is skipped, not copied).
#[derive(Deserialize)]
pub(super) struct CodeOnly {
    pub(super) error: CodeOnlyDetail,
}

#[derive(Deserialize)]
pub(super) struct CodeOnlyDetail {
    pub(super) code: ErrorCode,
}
