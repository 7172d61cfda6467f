//! The HTTP API: [`app`] builds the router over an [`AppState`].
//!
//! | route | who | what |
//! | --- | --- | --- |
//! | `POST /v1/sales` | admin | create a sale |
//! | `GET /v1/sales/{id}` | anyone | stock and status |
//! | `POST /v1/sales/{id}/purchases` | anyone | buy |
//! | `GET /v1/sales/{id}/orders` | admin | committed orders, paged |
//! | `GET /v1/orders/{order_id}` | anyone | one order |
//! | `POST /v1/orders/{order_id}/cancel` | anyone | cancel an order |
//! | `POST /v1/sales/{id}/queue` | anyone | join a sale's waiting room |
//! | `GET /v1/queue/{ticket}` | anyone | a queue ticket (and its admission token) |
//! | `GET /queue/{id}` | anyone | the waiting page of a sale |
//! | `GET /healthz`, `/readyz`, `/metrics`, `/openapi.json` | anyone | operations |

mod auth;
pub mod dto;
pub mod error;
pub mod json;
mod ops;
mod orders;
mod purchases;
mod queue;
mod sales;

pub(crate) use sales::{snapshot as sale_snapshot, unknown_sale};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};
use tower_http::trace::TraceLayer;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::state::AppState;
use error::ApiError;

/// The OpenAPI 3 document, generated from the handlers and their types.
#[derive(OpenApi)]
#[openapi(
    info(title = "Stockade", description = "Sell limited stock to a stampede, correctly."),
    paths(
        sales::create_sale, sales::get_sale, purchases::purchase,
        orders::get_order, orders::cancel_order, orders::list_orders,
        queue::join_queue, queue::poll_ticket, queue::waiting_page,
        ops::healthz, ops::readyz, ops::metrics, ops::openapi,
    ),
    components(schemas(dto::CreateSale, dto::Sale, dto::PurchaseRequest, dto::OrderBody,
                       dto::OrderPage, dto::ErrorBody, dto::ErrorDetail,
                       dto::WaitingRoom, dto::JoinQueue, dto::QueueTicket)),
    modifiers(&AdminToken),
)]
pub struct ApiDoc;

struct AdminToken;

impl Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The service's router.
pub fn app(state: AppState) -> Router {
    Router::new()
        .route("/v1/sales", post(sales::create_sale))
        .route("/v1/sales/{id}", get(sales::get_sale))
        .route("/v1/sales/{id}/purchases", post(purchases::purchase))
        .route("/v1/sales/{id}/orders", get(orders::list_orders))
        .route("/v1/orders/{order_id}", get(orders::get_order))
        .route("/v1/orders/{order_id}/cancel", post(orders::cancel_order))
        .route("/v1/sales/{id}/queue", post(queue::join_queue))
        .route("/v1/queue/{ticket}", get(queue::poll_ticket))
        .route("/queue/{id}", get(queue::waiting_page))
        .route("/assets/queue.js", get(queue::waiting_page_script))
        .route("/assets/queue.css", get(queue::waiting_page_style))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi))
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such route; see /openapi.json",
            )
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "this route does not take that method; see /openapi.json",
            )
        })
        .layer(DefaultBodyLimit::max(json::MAX_BODY_BYTES))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}
