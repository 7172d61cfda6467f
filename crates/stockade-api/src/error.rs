//! The error shape of every non-2xx answer.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::ErrorCode;

/// The error shape of every non-2xx answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable code, e.g. `sold_out`, `invalid_request`.
    pub code: ErrorCode,
    /// A message for people.
    pub message: String,
    /// `invalid_request`: the field that is invalid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The order the error is about: `order_failed`, and
    /// `store_unavailable` for an order kept and committed later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(format = Uuid)]
    pub order_id: Option<String>,
    /// The SKU the error is about: `insufficient_stock`, `unknown_sku`, and
    /// `limit_exceeded` of a per-SKU limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sku: Option<String>,
    /// `insufficient_stock`: the items of `sku` left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u32>,
    /// `limit_exceeded` of a per-SKU limit: the items of `sku` the buyer
    /// holds already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub already: Option<u32>,
}
