//! Extractors whose every failure is a clear 4xx in the API's error shape.
//! A JSON body: wrong content type 415, too large 413, malformed 400,
//! well-formed but invalid 422 naming the field. A path segment: not UTF-8
//! after percent-decoding 400 (axum's own answer is `text/plain`). And
//! the answers under load ([`answer`]), written into one buffer sized for
//! them.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use stockade_api::ErrorCode;

use super::error::ApiError;

/// The largest accepted request body.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// A JSON request body of type `T`.
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = request
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|mime| {
                let mime = mime.trim().to_ascii_lowercase();
                mime == "application/json"
                    || (mime.starts_with("application/") && mime.ends_with("+json"))
            });
        if !is_json {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "send the body as JSON with Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        ErrorCode::PayloadTooLarge,
                        format!("the body must be at most {MAX_BODY_BYTES} bytes"),
                    )
                } else {
                    ApiError::new(ErrorCode::InvalidBody, rejection.body_text())
                }
            })?;
        parse(&bytes).map(ApiJson)
    }
}

/// A path parameter of type `T` (a `String` for one segment).
#[derive(Debug)]
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(ApiError::new(
                ErrorCode::InvalidPath,
                format!(
                    "{}; path segments must be UTF-8 after percent-decoding",
                    rejection.body_text()
                ),
            )),
        }
    }
}

/// Parses `bytes` as `T`, telling syntax errors (400) from invalid values
/// (422 with the path of the offending field).
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Every body of this API is an object; serde would otherwise read an
    // array as a struct and report a confusing "[0]" path.
    if !bytes.trim_ascii_start().starts_with(b"{") {
        return Err(
            match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                Ok(_) => ApiError::invalid("body", "must be a JSON object"),
                Err(e) => ApiError::new(
                    ErrorCode::InvalidJson,
                    format!("the body is not valid JSON: {e}"),
                ),
            },
        );
    }
    // Most bodies are valid: parse them as they are, and only when that
    // fails again with the path tracked (which copies every key it reads)
    // to say which field is wrong.
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        // A value error in a body that is not valid JSON as a whole (e.g.
        // trailing garbage) is still a syntax error.
        let whole_is_json = serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok();
        if inner.is_syntax() || inner.is_eof() || !whole_is_json {
            ApiError::new(
                ErrorCode::InvalidJson,
                format!("the body is not valid JSON: {inner}"),
            )
        } else {
            let field = if path == "." { "body".to_owned() } else { path };
            ApiError::invalid(&field, strip_position(&inner.to_string()))
        }
    })?;
    deserializer.end().map_err(|e| {
        ApiError::new(
            ErrorCode::InvalidJson,
            format!("the body is not valid JSON: {e}"),
        )
    })?;
    Ok(value)
}

/// Room for a purchase's answer (an order is about 250 bytes, a refusal
/// about 100): axum's `Json` starts at 128 bytes and grows twice for an
/// order.
const ANSWER_CAPACITY: usize = 384;

/// `status` with `value` as its JSON body, written once into a buffer
/// sized for the answers that are sent under load.
pub fn answer(status: StatusCode, value: &impl Serialize) -> Response {
    let mut bytes = Vec::with_capacity(ANSWER_CAPACITY);
    if let Err(error) = serde_json::to_writer(&mut bytes, value) {
        return ApiError::internal(format!("rendering an answer: {error}")).into_response();
    }
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// serde_json appends " at line 1 column 17"; the field name says more.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(at) => message[..at].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        user_id: String,
        #[serde(default)]
        quantity: u32,
    }

    #[test]
    fn syntax_errors_are_400_and_bad_values_422_with_the_field() {
        assert_eq!(
            parse::<Body>(b"{").unwrap_err().status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            parse::<Body>(b"{} x").unwrap_err().status(),
            StatusCode::BAD_REQUEST
        );
        let err = parse::<Body>(br#"{"user_id": "u", "quantity": -1}"#).unwrap_err();
        assert_eq!(err.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert!(format!("{err:?}").contains("quantity"), "{err:?}");
        let err = parse::<Body>(br#"{"user_id": "u", "quantity": 1.5}"#).unwrap_err();
        assert!(format!("{err:?}").contains("quantity"));
        let err = parse::<Body>(br#"{"user_id": "u", "quantity": 4294967296}"#).unwrap_err();
        assert!(format!("{err:?}").contains("quantity"));
        let err = parse::<Body>(br#"{"user_id": "u", "colour": "red"}"#).unwrap_err();
        assert!(format!("{err:?}").contains("colour"), "{err:?}");
        let err = parse::<Body>(br#"{"quantity": 1}"#).unwrap_err();
        assert!(format!("{err:?}").contains("user_id"), "{err:?}");
        assert!(parse::<Body>(br#"{"user_id": "u"}"#).is_ok());
    }
}
