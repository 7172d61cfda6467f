//! The one error shape of the API: `{"error": {"code", "message"}}` with a
//! stable [`ErrorCode`], which gives the status and `Retry-After`. Internal
//! failures are logged and answered without details.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};
use stockade_api::ErrorCode;
use stockade_core::{EngineError, ValidationError};

use crate::rate_limit::Limited;
use stockade_store::StoreError;

/// An API error: stable code, message for the client.
#[derive(Debug)]
pub struct ApiError {
    code: ErrorCode,
    /// The code's status but for the one documented exception (a looked-up
    /// order the store refused is 404, not 409).
    status: StatusCode,
    message: String,
    retry_after: Option<u32>,
    /// Fields added to the error object (most errors have none).
    extra: Vec<(&'static str, Value)>,
    /// Boxed: most errors have none, and the error stays small.
    headers: Option<Box<[(HeaderName, HeaderValue)]>>,
}

impl ApiError {
    /// An error with `code` and `message`, answered with the code's status
    /// and `Retry-After`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            status: code.status(),
            message: message.into(),
            retry_after: code.retry_after(),
            extra: Vec::new(),
            headers: None,
        }
    }

    /// 422 `invalid_request` naming the field.
    pub fn invalid(field: &str, reason: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::InvalidRequest, format!("{field}: {reason}"))
            .with("field", Value::String(field.to_owned()))
    }

    /// The same error answered with `status` instead of its code's.
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Adds a field to the error object (e.g. the order id of a 409).
    pub fn with(mut self, key: &'static str, value: Value) -> Self {
        self.extra.push((key, value));
        self
    }

    /// Adds a response header (e.g. `WWW-Authenticate`).
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        let mut headers = self.headers.take().map(Vec::from).unwrap_or_default();
        headers.push((name, value));
        self.headers = Some(headers.into_boxed_slice());
        self
    }

    /// The added field `key` (see [`ApiError::with`]), if it has one.
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.extra
            .iter()
            .find(|(name, _)| *name == key)
            .map(|(_, value)| value)
    }

    /// The status code.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable error code (e.g. `sold_out`): the outcome label of a
    /// refused purchase in the metrics.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// An unexpected failure: logged in full, answered as a bare 500.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        tracing::error!(%error, "internal error");
        Self::new(
            ErrorCode::Internal,
            "internal error; the details are in the server log",
        )
    }
}

impl From<ValidationError> for ApiError {
    fn from(error: ValidationError) -> Self {
        Self::invalid(error.field, error.reason)
    }
}

/// 429 `rate_limited` with `Retry-After` and the IETF draft's
/// `RateLimit-Policy` and `RateLimit` headers.
impl From<Limited> for ApiError {
    fn from(limited: Limited) -> Self {
        let retry = limited.retry_after_seconds();
        let who = match limited.scope {
            crate::rate_limit::Scope::Buyer => "this buyer",
            crate::rate_limit::Scope::Ip => "this client address",
        };
        let mut error = Self::new(
            ErrorCode::RateLimited,
            format!("too many requests from {who}; nothing was done; retry after {retry} s"),
        );
        error.retry_after = Some(u32::try_from(retry).unwrap_or(u32::MAX));
        let header_value =
            |text: String| HeaderValue::try_from(text).unwrap_or(HeaderValue::from_static(""));
        error
            .with_header(
                HeaderName::from_static("ratelimit-policy"),
                header_value(limited.policy_header()),
            )
            .with_header(
                HeaderName::from_static("ratelimit"),
                header_value(limited.header()),
            )
    }
}

impl From<EngineError> for ApiError {
    fn from(error: EngineError) -> Self {
        if let EngineError::Timeout(_) = error {
            tracing::warn!(%error, "stock engine timed out");
            return Self::new(
                ErrorCode::EngineUnavailable,
                "the stock engine did not answer in time, so the purchase may or may not have \
                 gone through: retry with the same Idempotency-Key to find out",
            );
        }
        if error.is_retryable() {
            tracing::warn!(%error, "stock engine unavailable");
            Self::new(
                ErrorCode::EngineUnavailable,
                "the stock engine is unavailable; retry shortly (with the same Idempotency-Key)",
            )
        } else {
            Self::internal(error)
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) => {
                tracing::warn!(%error, "order store unavailable");
                Self::new(
                    ErrorCode::StoreUnavailable,
                    "the order store is unavailable; retry shortly",
                )
            }
            StoreError::Failed(_) => Self::internal(error),
        }
    }
}

/// The body of an error without added fields, serialised as the general
/// case below is (serde_json's objects keep their keys sorted, and `code`
/// comes before `message`), without building a JSON tree first: the
/// rejections answered under load (409 `sold_out`, 429, 503) take this way.
#[derive(Serialize)]
struct PlainErrorBody<'a> {
    error: PlainError<'a>,
}

#[derive(Serialize)]
struct PlainError<'a> {
    code: &'a str,
    message: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = if self.extra.is_empty() {
            let body = PlainErrorBody {
                error: PlainError {
                    code: self.code.as_str(),
                    message: &self.message,
                },
            };
            super::json::answer(self.status, &body)
        } else {
            let mut body = json!({ "code": self.code.as_str(), "message": self.message });
            for (key, value) in self.extra {
                body[key] = value;
            }
            super::json::answer(self.status, &json!({ "error": body }))
        };
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        for (name, value) in self.headers.into_iter().flat_map(|h| h.into_vec()) {
            response.headers_mut().insert(name, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(error: ApiError) -> (StatusCode, String) {
        let response = error.into_response();
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    /// The wire format: both ways of writing the body give serde_json's
    /// object, keys sorted.
    #[tokio::test]
    async fn error_bodies_keep_their_bytes() {
        let (status, body) =
            body_of(ApiError::new(ErrorCode::SoldOut, "sale s-1 is sold out")).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(
            body,
            r#"{"error":{"code":"sold_out","message":"sale s-1 is sold out"}}"#
        );
        let (_, body) = body_of(ApiError::new(ErrorCode::SoldOut, "a \"quoted\"\nline")).await;
        let tree = json!({ "error": { "code": "sold_out", "message": "a \"quoted\"\nline" } });
        assert_eq!(body, tree.to_string());
        let (status, body) = body_of(ApiError::invalid("quantity", "must be at least 1")).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            body,
            r#"{"error":{"code":"invalid_request","field":"quantity","message":"quantity: must be at least 1"}}"#
        );
    }
}
