//! Draw sales over HTTP: a sale's draw settings at creation, entries
//! (`POST /v1/sales/{id}/entries`), a buyer's result
//! (`GET /v1/sales/{id}/entries/me`) and the published draw
//! (`GET /v1/sales/{id}/draw`). The draw itself is [`crate::draws`].

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use serde::Deserialize;
use stockade_api::{
    Allocation, CreateSale, DrawBody, DrawTerms, DrawnEntry, EntryBody, EntryRequest, ErrorBody,
    ErrorCode, ItemBody,
};
use stockade_core::draw::DrawConfig;
use stockade_core::{SaleId, SaleSpec, SkuId, WantedItem, rule};
use stockade_store::draws::{DrawRecord, Entered, Entry};

use super::error::ApiError;
use super::identity::Caller;
use super::json::{ApiJson, ApiPath};
use super::sales::{sale_id, unknown_sale};
use crate::state::AppState;

/// A new sale's draw settings, checked against the sale: None for a sale
/// sold to the fastest (the default).
pub fn settings(body: &CreateSale, spec: &SaleSpec) -> Result<Option<DrawConfig>, ApiError> {
    let window = (body.entries_open_at, body.entries_close_at);
    if body.allocation.unwrap_or_default() == Allocation::Race {
        if window != (None, None) {
            return Err(ApiError::invalid(
                "entries_open_at",
                "is for a draw sale: set allocation to draw",
            ));
        }
        return Ok(None);
    }
    let (Some(open), Some(close)) = window else {
        return Err(ApiError::invalid(
            "entries_close_at",
            "a draw sale needs entries_open_at and entries_close_at",
        ));
    };
    let config = DrawConfig::new(open, close)?;
    if body.waiting_room.is_some() {
        return Err(ApiError::invalid(
            "waiting_room",
            "a draw sale has no waiting room: its buyers enter the draw",
        ));
    }
    if spec.window_at(config.close_at) != stockade_core::sale::Window::Open {
        return Err(ApiError::invalid(
            "entries_close_at",
            "the sale must be open when entries close (starts_at at or before it, ends_at after it): the winners' orders are made then",
        ));
    }
    Ok(Some(config))
}

/// The refusal of a draw sale on an instance without a draw key (a
/// PostgreSQL store with no `STOCKADE_DRAW_KEY`: see [`crate::draw_key`]).
pub fn no_draw_key() -> ApiError {
    ApiError::invalid(
        "allocation",
        "this deployment has no draw key, so it cannot seal a draw's seed: set STOCKADE_DRAW_KEY (or STOCKADE_DRAW_KEY_FILE) to the same secret of at least 32 characters on every instance, restart them, and create the sale again",
    )
}

/// The published terms of a draw.
pub fn terms(draw: &DrawRecord) -> DrawTerms {
    DrawTerms {
        entries_open_at: draw.config.open_at,
        entries_close_at: draw.config.close_at,
        seed_commitment: draw.commitment.clone(),
    }
}

fn entry_body(entry: &Entry) -> EntryBody {
    EntryBody {
        entry_id: entry.id.to_string(),
        sale_id: entry.sale_id.to_string(),
        user_id: entry.user_id.to_string(),
        items: entry.items.iter().map(ItemBody::from).collect(),
        result: entry.result,
        position: entry.position,
        order_id: entry.order_id.map(|id| id.to_string()),
        created_at: entry.created_at,
    }
}

/// Enters a buyer in a draw sale (once: the same buyer again gets their
/// entry back).
#[utoipa::path(
    post, path = "/v1/sales/{id}/entries", tag = "draws",
    params(("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")),
    request_body = EntryRequest,
    security((), ("buyer_jwt" = []), ("admin_token" = [])),
    responses(
        (status = 201, description = "entered", body = EntryBody),
        (status = 200, description = "the buyer had entered: their entry", body = EntryBody),
        (status = 401, description = "unauthenticated", body = ErrorBody),
        (status = 404, description = "unknown_sale, unknown_sku", body = ErrorBody),
        (status = 409, description = "entries_not_open, entries_closed, not_a_draw (the sale is bought, not drawn), limit_exceeded (more than the buyer's limit or the per-SKU limit), insufficient_stock (more of a SKU than its whole stock: the entry could never win)", body = ErrorBody),
        (status = 422, description = "invalid_request, sku_required", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
    )
)]
pub async fn enter(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    caller: Caller,
    ApiJson(body): ApiJson<EntryRequest>,
) -> Result<(StatusCode, Json<EntryBody>), ApiError> {
    let sale = sale_id(&id)?;
    let user = caller.buyer(&state, body.user_id).await?;
    let tier = caller.tier(body.tier)?;
    let wanted = vec![WantedItem {
        sku: body.sku.map(SkuId::new).transpose()?,
        quantity: body.quantity.unwrap_or(1),
    }];
    stockade_core::sku::check_wanted(&wanted)?;
    let spec = state
        .store()
        .sale(&sale)
        .await?
        .ok_or_else(|| unknown_sale(&sale))?;
    let items = rule::resolve(&spec, &wanted).map_err(|refused| refusal(&sale, refused))?;
    let quantity: u32 = items.iter().map(|&(_, q)| q).sum();
    let tier_at = rule::tier(&spec, tier.as_ref());
    rule::limit(&spec, tier_at, 0, quantity).map_err(|refused| refusal(&sale, refused))?;
    // An entry that can never win is refused now, not drawn to lose.
    rule::sku_limits(&spec, &items, |_| 0).map_err(|refused| refusal(&sale, refused))?;
    if let Some(&(i, wanted)) = items.iter().find(|&&(i, q)| q > spec.skus()[i].stock) {
        let sku = &spec.skus()[i];
        return Err(ApiError::new(
            ErrorCode::InsufficientStock,
            format!(
                "SKU {} of sale {sale} has {} items in all: an entry for {wanted} could never win",
                sku.id, sku.stock
            ),
        )
        .with("sku", serde_json::Value::String(sku.id.to_string()))
        .with("remaining", serde_json::Value::from(sku.stock)));
    }
    let items = rule::order_items(&spec, &items);
    let tier = rule::order_tier(&spec, tier_at);
    match state
        .store()
        .enter_draw(&sale, &user, &items, tier.as_ref())
        .await?
    {
        Entered::New(entry) => Ok((StatusCode::CREATED, Json(entry_body(&entry)))),
        Entered::Again(entry) => Ok((StatusCode::OK, Json(entry_body(&entry)))),
        Entered::NotOpen(at) => Err(ApiError::new(
            ErrorCode::EntriesNotOpen,
            format!("entries to the draw of sale {sale} open at {at}"),
        )),
        Entered::Closed(at) => Err(ApiError::new(
            ErrorCode::EntriesClosed,
            format!(
                "entries to the draw of sale {sale} closed at {at}; GET /v1/sales/{sale}/draw shows the draw"
            ),
        )),
        Entered::NotADraw => Err(not_a_draw(&sale)),
    }
}

/// A refusal of an entry's items or quantity, as a purchase's would be.
fn refusal(sale: &SaleId, refused: stockade_core::PurchaseOutcome) -> ApiError {
    use stockade_core::PurchaseOutcome;
    match refused {
        PurchaseOutcome::UnknownSku { sku } => ApiError::new(
            ErrorCode::UnknownSku,
            format!("sale {sale} has no SKU {sku}; GET /v1/sales/{sale} lists its skus"),
        )
        .with("sku", serde_json::Value::String(sku.to_string())),
        PurchaseOutcome::SkuRequired => ApiError::new(
            ErrorCode::SkuRequired,
            format!("sale {sale} has several SKUs: name the one to enter for with sku"),
        ),
        PurchaseOutcome::LimitExceeded { sku: Some(sku), .. } => ApiError::new(
            ErrorCode::LimitExceeded,
            format!("an entry of sale {sale} may ask for no more than the per-SKU limit of {sku}"),
        )
        .with("sku", serde_json::Value::String(sku.to_string())),
        _ => ApiError::new(
            ErrorCode::LimitExceeded,
            format!("an entry of sale {sale} may ask for no more than the buyer's per-user limit"),
        ),
    }
}

fn not_a_draw(sale: &SaleId) -> ApiError {
    ApiError::new(
        ErrorCode::NotADraw,
        format!(
            "sale {sale} is sold to whoever buys first, not drawn: buy with POST /v1/sales/{sale}/purchases"
        ),
    )
}

/// `?user_id=` of `GET /v1/sales/{id}/entries/me` (identity off).
#[derive(Debug, Deserialize)]
pub struct Who {
    user_id: Option<String>,
}

/// A buyer's entry in a draw and where it stands.
#[utoipa::path(
    get, path = "/v1/sales/{id}/entries/me", tag = "draws",
    params(
        ("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$"),
        ("user_id" = Option<String>, Query, description = "the buyer, with identity off (with a JWT: its sub)", min_length = 1, max_length = 128, pattern = r"^[^\s\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF](?:[^\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF]*[^\s\x00-\x1F\x7F-\x9F\u061C\u200B-\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF])?$"),
    ),
    security((), ("buyer_jwt" = []), ("admin_token" = [])),
    responses(
        (status = 200, description = "the entry: `result` entered, won (with `order_id`), waitlisted or lost", body = EntryBody),
        (status = 401, description = "unauthenticated", body = ErrorBody),
        (status = 404, description = "unknown_sale, unknown_entry (the buyer did not enter)", body = ErrorBody),
        (status = 409, description = "not_a_draw", body = ErrorBody),
        (status = 422, description = "invalid_request: not a sale id, or no user_id with identity off", body = ErrorBody),
        (status = 429, description = "rate_limited", body = ErrorBody),
    )
)]
pub async fn my_entry(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    caller: Caller,
    Query(who): Query<Who>,
) -> Result<Json<EntryBody>, ApiError> {
    let sale = sale_id(&id)?;
    let user = caller.buyer(&state, who.user_id).await?;
    if state.store().draw(&sale).await?.is_none() {
        return Err(match state.store().sale(&sale).await? {
            Some(_) => not_a_draw(&sale),
            None => unknown_sale(&sale),
        });
    }
    let entry = state.store().entry_of(&sale, &user).await?.ok_or_else(|| {
        ApiError::new(
            ErrorCode::UnknownEntry,
            format!("{user} did not enter the draw of sale {sale}"),
        )
    })?;
    Ok(Json(entry_body(&entry)))
}

/// Paging of a published draw's entries.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DrawPageQuery {
    /// Entries after this place in the draw's order (from `next_after`);
    /// absent: from the first.
    pub after: Option<u32>,
    /// Page size, 1 to 10000 (default 1000).
    #[param(minimum = 1, maximum = 10000)]
    pub limit: Option<u32>,
}

/// A draw sale's draw: before it is made, its window and the commitment to
/// its seed; after, the seed, the entry set's digest and the entries in the
/// draw's order, a page at a time, so anyone can recompute it.
#[utoipa::path(
    get, path = "/v1/sales/{id}/draw", tag = "draws",
    params(
        ("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$"),
        DrawPageQuery,
    ),
    responses(
        (status = 200, body = DrawBody),
        (status = 404, description = "unknown_sale", body = ErrorBody),
        (status = 409, description = "not_a_draw", body = ErrorBody),
        (status = 422, description = "invalid_request: not a sale id, a bad `after` or `limit`", body = ErrorBody),
    )
)]
pub async fn get_draw(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    query: Result<Query<DrawPageQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<DrawBody>, ApiError> {
    let Query(page) = query.map_err(|e| ApiError::invalid("query", e.body_text()))?;
    let limit = page.limit.unwrap_or(1000);
    if !(1..=10_000).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be between 1 and 10000"));
    }
    let sale = sale_id(&id)?;
    let Some(draw) = state.store().draw(&sale).await? else {
        return Err(match state.store().sale(&sale).await? {
            Some(_) => not_a_draw(&sale),
            None => unknown_sale(&sale),
        });
    };
    let now = state.clock().now();
    let phase = match (draw.drawn_at, draw.settled_at) {
        (_, Some(_)) => "settled",
        (Some(_), None) => "drawn",
        (None, None) if now < draw.config.close_at => "entries_open",
        (None, None) => "entries_closed",
    };
    // Exactly the frozen set, a page at a time: every entry has its place
    // once frozen.
    let entries = match draw.drawn_at {
        Some(_) => {
            state
                .store()
                .placed_entries(&sale, page.after, limit)
                .await?
        }
        None => Vec::new(),
    };
    let next_after = (entries.len() == limit as usize)
        .then(|| entries.last().and_then(|e| e.position))
        .flatten();
    let order = entries
        .iter()
        .map(|entry| DrawnEntry {
            entry_id: entry.id.to_string(),
            items: entry.items.iter().map(ItemBody::from).collect(),
            tier: entry.tier.as_ref().map(ToString::to_string),
            result: entry.result,
            drawn_result: entry.drawn_result,
        })
        .collect();
    Ok(Json(DrawBody {
        sale_id: sale.to_string(),
        state: phase.to_owned(),
        terms: terms(&draw),
        entry_count: state.store().entry_count(&sale).await?,
        seed: draw.published_seed().map(str::to_owned),
        drawn_at: draw.drawn_at,
        entry_digest: draw.entry_digest.clone(),
        order,
        next_after,
    }))
}

const PAGE: &str = include_str!("../../assets/draw.html");
const SCRIPT: &str = include_str!("../../assets/draw.js");

/// The entry page of a draw sale: enters the buyer, then shows their
/// result once the draw is made. Plain HTML and JavaScript, no build step.
#[utoipa::path(
    get, path = "/draw/{id}", tag = "draws",
    params(("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")),
    responses(
        (status = 200, description = "the entry page", content_type = "text/html"),
        (status = 422, description = "invalid_request: not a sale id", body = ErrorBody),
    )
)]
pub async fn entry_page(ApiPath(id): ApiPath<String>) -> Result<Html<String>, ApiError> {
    // The id is placed in the page only once it is known to be plain
    // `A-Za-z0-9_-`: nothing to escape.
    let sale = sale_id(&id)?;
    Ok(Html(PAGE.replace("{{sale_id}}", sale.as_str())))
}

/// The entry page's script.
pub async fn entry_page_script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}
