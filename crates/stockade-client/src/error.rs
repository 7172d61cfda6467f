//! Why a call got no usable answer.

use std::fmt;

use http::StatusCode;
// With its causes: reqwest's own message hides whether it was a timeout,
// a refused connection or a reset.
use stockade_core::redact::one_line;

use stockade_api::{ErrorCode, ErrorDetail};

/// The most of an unreadable body an error keeps.
const BODY_EXCERPT: usize = 512;

/// Why a call got no usable answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The client could not be built or the request could not be made: a
    /// base URL that is not `http(s)://...`, a token that is not a valid
    /// header value.
    #[error("{0}")]
    Setup(String),
    /// No answer: the connection failed or was cut, or the request timed
    /// out.
    #[error("no answer: {}", one_line(.0))]
    Transport(#[source] reqwest::Error),
    /// The API answered with an error (a non-2xx status and its error
    /// body).
    #[error("{0}")]
    Api(Box<ErrorAnswer>),
    /// The answer's body is not what the API sends (not JSON, another
    /// shape, an error code this client does not know).
    #[error("HTTP {status}: unreadable body ({reason}): {body}")]
    Unreadable {
        /// The answer's status.
        status: StatusCode,
        /// Why it could not be read.
        reason: String,
        /// The start of the body, for people.
        body: String,
    },
}

impl ClientError {
    /// The answer's status; None without an answer.
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            Self::Api(answer) => Some(answer.status),
            Self::Unreadable { status, .. } => Some(*status),
            Self::Setup(_) | Self::Transport(_) => None,
        }
    }

    /// The API's error code, for an error answer.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Self::Api(answer) => Some(answer.error.code),
            _ => None,
        }
    }

    /// The error answer, if the API gave one.
    pub fn answer(&self) -> Option<&ErrorAnswer> {
        match self {
            Self::Api(answer) => Some(answer),
            _ => None,
        }
    }

    /// The answer's `Retry-After`, in seconds.
    pub fn retry_after(&self) -> Option<u32> {
        self.answer().and_then(|answer| answer.retry_after)
    }

    /// Whether no answer came (the request may or may not have been
    /// carried out: retry a purchase with the same idempotency key).
    pub fn is_transport(&self) -> bool {
        matches!(self, Self::Transport(_))
    }
}

/// An error answer of the API.
#[derive(Debug)]
pub struct ErrorAnswer {
    /// Its status (usually [`ErrorCode::status`], but not always: an
    /// `order_failed` lookup is a 404).
    pub status: StatusCode,
    /// Its `Retry-After`, in seconds.
    pub retry_after: Option<u32>,
    /// The error: its code, message, and field or order id.
    pub error: ErrorDetail,
}

impl fmt::Display for ErrorAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "HTTP {} {}: {}",
            self.status.as_u16(),
            self.error.code,
            self.error.message
        )?;
        if let Some(field) = &self.error.field {
            write!(f, " (field {field})")?;
        }
        if let Some(seconds) = self.retry_after {
            write!(f, " (retry after {seconds} s)")?;
        }
        Ok(())
    }
}

pub(super) fn unreadable(
    status: StatusCode,
    error: &serde_json::Error,
    bytes: &[u8],
) -> ClientError {
    let excerpt = &bytes[..bytes.len().min(BODY_EXCERPT)];
    ClientError::Unreadable {
        status,
        reason: error.to_string(),
        body: String::from_utf8_lossy(excerpt).into_owned(),
    }
}
