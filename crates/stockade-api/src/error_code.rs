//! The closed set of error codes. Each code knows its HTTP status and
//! whether it asks the client to come back (`Retry-After`), so a handler
//! names only the code and the message; the OpenAPI error list and the
//! metrics' outcome labels are derived from [`ErrorCode::ALL`].

use http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $text:literal, $status:ident, $retry:expr;)+) => {
        /// A stable error code of the API, as in `{"error": {"code": ...}}`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)+
        }

        impl ErrorCode {
            /// Every code, in the order of this file.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The code as sent on the wire.
            pub const fn as_str(self) -> &'static str {
                match self { $(ErrorCode::$variant => $text,)+ }
            }

            /// The HTTP status this code is answered with.
            pub const fn status(self) -> StatusCode {
                match self { $(ErrorCode::$variant => StatusCode::$status,)+ }
            }

            /// Seconds a client should wait before retrying (`Retry-After`),
            /// for codes that are worth retrying as they are; None for the
            /// others. A rate limit sets its own.
            pub const fn retry_after(self) -> Option<u32> {
                match self { $(ErrorCode::$variant => $retry,)+ }
            }
        }
    };
}

error_codes! {
    /// A field of the request is invalid; `field` names it.
    InvalidRequest = "invalid_request", UNPROCESSABLE_ENTITY, None;
    /// The body is not JSON.
    InvalidJson = "invalid_json", BAD_REQUEST, None;
    /// The body could not be read.
    InvalidBody = "invalid_body", BAD_REQUEST, None;
    /// A path segment is invalid.
    InvalidPath = "invalid_path", BAD_REQUEST, None;
    /// The body is not `application/json`.
    UnsupportedMediaType = "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE, None;
    /// The body is larger than the API takes.
    PayloadTooLarge = "payload_too_large", PAYLOAD_TOO_LARGE, None;
    /// No such route.
    NotFound = "not_found", NOT_FOUND, None;
    /// The route does not take that method.
    MethodNotAllowed = "method_not_allowed", METHOD_NOT_ALLOWED, None;
    /// An operator credential (the admin or payments token) is missing or
    /// wrong.
    Unauthorized = "unauthorized", UNAUTHORIZED, None;
    /// A buyer's credential (the JWT) is missing or invalid.
    Unauthenticated = "unauthenticated", UNAUTHORIZED, None;
    /// The credential is valid but may not do this.
    Forbidden = "forbidden", FORBIDDEN, None;
    /// The request names another buyer than its JWT.
    UserMismatch = "user_mismatch", FORBIDDEN, None;
    /// The sale has a waiting room and the admission token is missing or
    /// not valid for this buyer and sale.
    AdmissionRequired = "admission_required", FORBIDDEN, None;
    /// The admission token has bought already.
    AdmissionSpent = "admission_spent", FORBIDDEN, None;
    /// Too many requests from this buyer or client; `Retry-After` says when.
    RateLimited = "rate_limited", TOO_MANY_REQUESTS, None;
    /// No such sale.
    UnknownSale = "unknown_sale", NOT_FOUND, None;
    /// The sale has no SKU of that id.
    UnknownSku = "unknown_sku", NOT_FOUND, None;
    /// The sale has several SKUs and the purchase named none.
    SkuRequired = "sku_required", UNPROCESSABLE_ENTITY, None;
    /// No such order (or another buyer's).
    UnknownOrder = "unknown_order", NOT_FOUND, None;
    /// No such queue ticket.
    UnknownTicket = "unknown_ticket", NOT_FOUND, None;
    /// A sale with this id exists with other settings.
    SaleConflict = "sale_conflict", CONFLICT, None;
    /// The sale has no stock left.
    SoldOut = "sold_out", CONFLICT, None;
    /// Fewer items of a SKU are left than asked for (the answer names the
    /// `sku` and its `remaining`).
    InsufficientStock = "insufficient_stock", CONFLICT, None;
    /// The buyer's per-user limit does not allow this many more.
    LimitExceeded = "limit_exceeded", CONFLICT, None;
    /// The sale is allocated by a draw: enter it, nobody buys it.
    DrawSale = "draw_sale", CONFLICT, None;
    /// The draw sale's entries have not opened yet.
    EntriesNotOpen = "entries_not_open", CONFLICT, None;
    /// The draw sale's entries have closed.
    EntriesClosed = "entries_closed", CONFLICT, None;
    /// The sale is sold to whoever is fastest, not drawn: buy it.
    NotADraw = "not_a_draw", CONFLICT, None;
    /// No entry of this buyer in the sale's draw.
    UnknownEntry = "unknown_entry", NOT_FOUND, None;
    /// The sale has not started.
    NotStarted = "not_started", CONFLICT, None;
    /// The sale has ended.
    Ended = "ended", CONFLICT, None;
    /// The sale is bought without a queue.
    NoWaitingRoom = "no_waiting_room", CONFLICT, None;
    /// The order made with this key was refused by the store: nothing was
    /// sold.
    OrderFailed = "order_failed", CONFLICT, None;
    /// The order is not committed yet.
    OrderPending = "order_pending", CONFLICT, None;
    /// The order was cancelled.
    OrderCancelled = "order_cancelled", CONFLICT, None;
    /// The order's payment hold ran out first.
    HoldExpired = "hold_expired", CONFLICT, None;
    /// The idempotency key was used for another purchase.
    IdempotencyKeyReused = "idempotency_key_reused", UNPROCESSABLE_ENTITY, None;
    /// Too many purchases in flight on this instance: nothing was sold.
    Overloaded = "overloaded", SERVICE_UNAVAILABLE, Some(1);
    /// The sale's engine is being rebuilt from the store: nothing was sold.
    Rebuilding = "rebuilding", SERVICE_UNAVAILABLE, Some(1);
    /// The stock engine cannot be reached.
    EngineUnavailable = "engine_unavailable", SERVICE_UNAVAILABLE, Some(1);
    /// The order store cannot be reached (with `order_id`: the order is
    /// kept and committed later).
    StoreUnavailable = "store_unavailable", SERVICE_UNAVAILABLE, Some(1);
    /// The waiting room's queue cannot be reached.
    QueueUnavailable = "queue_unavailable", SERVICE_UNAVAILABLE, Some(1);
    /// Too many open connections on this instance.
    TooManyConnections = "too_many_connections", SERVICE_UNAVAILABLE, Some(1);
    /// An unexpected failure; the details are in the server log.
    Internal = "internal", INTERNAL_SERVER_ERROR, None;
}

impl ErrorCode {
    /// The code named `text`, if it is one.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|code| code.as_str() == text)
    }

    /// Whether this code refuses a purchase because of the sale or the
    /// buyer (404 or 409: the answer would be the same on a retry): a
    /// "rejection" on the dashboard, not a failure of the service.
    pub const fn is_rejection(self) -> bool {
        matches!(
            self,
            Self::SoldOut
                | Self::InsufficientStock
                | Self::LimitExceeded
                | Self::NotStarted
                | Self::Ended
                | Self::UnknownSale
                | Self::UnknownSku
                | Self::OrderFailed
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_round_trips_through_its_wire_name() {
        for &code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<ErrorCode>(&json).unwrap(), code);
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
        assert_eq!(ErrorCode::parse("no_such_code"), None);
    }

    #[test]
    fn only_unavailable_answers_ask_for_a_retry() {
        for &code in ErrorCode::ALL {
            let unavailable = code.status() == StatusCode::SERVICE_UNAVAILABLE;
            assert_eq!(code.retry_after().is_some(), unavailable, "{code}");
        }
    }

    #[test]
    fn rejections_are_answered_404_or_409() {
        for &code in ErrorCode::ALL.iter().filter(|code| code.is_rejection()) {
            assert!(
                matches!(code.status(), StatusCode::NOT_FOUND | StatusCode::CONFLICT),
                "{code}"
            );
        }
    }
}
