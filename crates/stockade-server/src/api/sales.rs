//! Creating and reading sales.

use std::time::Duration;
use stockade_api::ErrorCode;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use stockade_core::{CreateOutcome, EngineError, Epoch, SaleId, SaleSnapshot, SaleSpec};

use super::auth::Admin;
use super::error::ApiError;
use super::json::{ApiJson, ApiPath};
use crate::sale_book::Door;
use crate::snapshot::WhenMissing;
use crate::state::AppState;
use crate::waiting_room::RoomLookup;
use stockade_api::{Allocation, CreateSale, ErrorBody, Sale, WaitingRoom};
use stockade_store::SaveSale;

/// Parses a sale id from the path.
pub fn sale_id(raw: &str) -> Result<SaleId, ApiError> {
    SaleId::new(raw).map_err(|e| ApiError::invalid("sale_id", e.reason))
}

fn spec(body: &CreateSale) -> Result<SaleSpec, ApiError> {
    let mut builder = SaleSpec::with_skus(body.id.as_str(), body.sku_specs()?)?;
    if let Some(limit) = body.per_user_limit {
        builder = builder.per_user_limit(limit)?;
    }
    if let Some(limit) = body.per_sku_limit {
        builder = builder.per_sku_limit(limit)?;
    }
    builder = builder.tiers(body.tier_specs()?);
    if let Some(at) = body.release_reserved_at {
        builder = builder.release_reserved_at(at);
    }
    if let Some(at) = body.starts_at {
        builder = builder.starts_at(at);
    }
    if let Some(at) = body.ends_at {
        builder = builder.ends_at(at);
    }
    if let Some(seconds) = body.hold_seconds {
        builder = builder.hold(Duration::from_secs(seconds))?;
    }
    if let Some(shards) = body.shards {
        builder = builder.shards(shards)?;
    }
    Ok(builder.build()?)
}

/// Creates a sale (admin). The identical request again answers 200.
#[utoipa::path(
    post, path = "/v1/sales", tag = "sales",
    request_body = CreateSale,
    security(("admin_token" = [])),
    responses(
        (status = 201, description = "created", body = Sale),
        (status = 200, description = "the identical sale already existed", body = Sale),
        (status = 401, description = "missing or wrong admin token", body = ErrorBody),
        (status = 409, description = "sale_conflict: the id exists with other parameters (or another waiting room)", body = ErrorBody),
        (status = 422, description = "invalid_request", body = ErrorBody),
    )
)]
pub async fn create_sale(
    _admin: Admin,
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateSale>,
) -> Result<(StatusCode, Json<Sale>), ApiError> {
    let room = body
        .waiting_room
        .as_ref()
        .map(WaitingRoom::config)
        .transpose()?;
    let spec = spec(&body)?;
    let draw = super::draws::settings(&body, &spec)?;
    // The seed is sealed: the store keeps a nonce and the commitment,
    // the seed needs the draw key too.
    let sealed = match (&draw, state.draw_key()) {
        (None, _) => None,
        (Some(_), Some(key)) => Some(key.seal(spec.id())),
        (Some(_), None) => return Err(super::draws::no_draw_key()),
    };
    // The store is the source of truth: record the sale there first, with
    // its waiting room or its draw in the same transaction.
    let (saved, existing_room, existing_draw) = state
        .store()
        .save_sale_with_room(
            &spec,
            room.as_ref(),
            draw.as_ref().zip(sealed.as_ref()),
            state.clock().now(),
        )
        .await?;
    let status = match saved {
        SaveSale::Created => StatusCode::CREATED,
        SaveSale::Exists if existing_room != room => {
            return Err(ApiError::new(
                ErrorCode::SaleConflict,
                format!(
                    "sale {} already exists with {}; use a new id",
                    spec.id(),
                    match existing_room {
                        Some(r) => format!(
                            "another waiting room ({} per second, {} s admissions, factor {})",
                            r.admit_per_second,
                            r.admission_ttl.as_secs(),
                            f64::from(r.admission_factor_milli) / 1_000.0
                        ),
                        None => "no waiting room".to_owned(),
                    }
                ),
            ));
        }
        SaveSale::Exists if existing_draw != draw => {
            return Err(ApiError::new(
                ErrorCode::SaleConflict,
                format!(
                    "sale {} already exists with {}; use a new id",
                    spec.id(),
                    match existing_draw {
                        Some(d) =>
                            format!("another draw (entries {} to {})", d.open_at, d.close_at),
                        None => "no draw".to_owned(),
                    }
                ),
            ));
        }
        SaveSale::Exists => StatusCode::OK,
        SaveSale::Conflict(existing) => {
            return Err(ApiError::new(
                ErrorCode::SaleConflict,
                format!(
                    "sale {} already exists with stock {} and per-user limit {}; use a new id",
                    existing.id(),
                    existing.total_stock(),
                    existing.per_user_limit()
                ),
            ));
        }
    };
    // Buyable here at once, even if a purchase found it missing a moment
    // ago (other instances: within the rejection ttl).
    state.book().sale_created(spec.id());
    if draw.is_some() {
        state.book().learn_room(spec.id(), Door::Draw);
    } else {
        state
            .waiting_rooms()
            .learn(state.book(), spec.clone(), room)
            .await;
    }
    // A new sale starts in the engine under the first epoch. An existing
    // one is left alone: if the engine lost it, the next purchase rebuilds
    // it from the store under a new epoch.
    // (The store engine has it already: saving it created it.)
    if status == StatusCode::CREATED && state.engine_apart() {
        match state.engine().create_sale(&spec).await {
            Ok(CreateOutcome::Created) => {}
            // The engine already holds a sale of that id that the store did
            // not have: left over from an earlier store (restored from a
            // backup, or another deployment on the same Redis and prefix),
            // with whatever stock it sold. Whatever its state, the store's
            // copy replaces it, or the engine would undersell (or oversell).
            Ok(CreateOutcome::AlreadyExists) | Err(EngineError::SaleConflict { .. }) => {
                tracing::warn!(sale = %spec.id(),
                    "the engine already held this new sale (left over from an earlier store?): rebuilding it from the store");
                crate::recovery::rebuild_sale(&state, spec.id(), Epoch::FIRST, "create")
                    .await
                    .map_err(|e| ApiError::internal(e.to_string()))?;
            }
            Err(error) => return Err(error.into()),
        }
    }
    let snapshot = snapshot(&state, spec.id())
        .await?
        .ok_or_else(|| ApiError::internal(format!("sale {} vanished after creation", spec.id())))?;
    let mut sale: Sale = snapshot.into();
    sale.waiting_room = room.map(Into::into);
    with_draw(&state, &mut sale, spec.id()).await?;
    Ok((status, Json(sale)))
}

/// Reads a sale's stock and status.
#[utoipa::path(
    get, path = "/v1/sales/{id}", tag = "sales",
    params(("id" = String, Path, description = "sale id", min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_-]+$")),
    responses(
        (status = 200, body = Sale),
        (status = 404, description = "unknown_sale", body = ErrorBody),
        (status = 503, description = "the engine is being rebuilt", body = ErrorBody),
    )
)]
pub async fn get_sale(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Sale>, ApiError> {
    let id = sale_id(&id)?;
    let snapshot = snapshot(&state, &id)
        .await?
        .ok_or_else(|| unknown_sale(&id))?;
    crate::metrics::record_remaining(&snapshot);
    let mut sale: Sale = snapshot.into();
    if let RoomLookup::Room(room) = state
        .waiting_rooms()
        .lookup(state.book(), state.store(), &id)
        .await?
    {
        sale.waiting_room = Some(room.config.into());
    }
    with_draw(&state, &mut sale, &id).await?;
    Ok(Json(sale))
}

/// Adds a draw sale's allocation and draw terms to its view.
async fn with_draw(state: &AppState, sale: &mut Sale, id: &SaleId) -> Result<(), ApiError> {
    if let Some(draw) = state.store().draw(id).await? {
        sale.allocation = Allocation::Draw;
        sale.draw = Some(super::draws::terms(&draw));
    }
    Ok(())
}

/// The sale as its current authority sees it: the engine's stock (which
/// counts orders still being committed), or the store's when the store
/// decides the sale or the engine has lost it (a rebuild is then started).
pub(crate) async fn snapshot(
    state: &AppState,
    id: &SaleId,
) -> Result<Option<SaleSnapshot>, ApiError> {
    Ok(
        crate::snapshot::snapshot_and_store_left(state, id, WhenMissing::Rebuild)
            .await?
            .map(|(s, _)| s),
    )
}

/// 404 `unknown_sale`.
pub fn unknown_sale(id: &SaleId) -> ApiError {
    ApiError::new(ErrorCode::UnknownSale, format!("there is no sale {id}"))
}
