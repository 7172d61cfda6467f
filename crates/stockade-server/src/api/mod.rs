//! The HTTP API: [`app`] builds the router over an [`AppState`].
//!
//! | route | who | what |
//! | --- | --- | --- |
//! | `POST /v1/sales` | admin | create a sale |
//! | `GET /v1/sales/{id}` | anyone | stock and status |
//! | `POST /v1/sales/{id}/purchases` | buyer | buy |
//! | `GET /v1/sales/{id}/orders` | admin | committed orders, paged |
//! | `GET /v1/orders/{order_id}` | its buyer, admin | one order (`?wait=N`: long poll while pending) |
//! | `POST /v1/orders/{order_id}/confirm` | payment service, admin | confirm a held order: the payment service's callback once the payment arrived |
//! | `POST /v1/orders/{order_id}/cancel` | its buyer, admin | cancel an order |
//! | `POST /v1/sales/{id}/queue` | buyer | join a sale's waiting room |
//! | `GET /v1/queue/{ticket}` | its holder | a queue ticket (and its admission token) |
//! | `GET /queue/{id}` | anyone | the waiting page of a sale |
//! | `GET /healthz`, `/readyz`, `/metrics`, `/openapi.json` | anyone | operations |
//! | `GET /dashboard` (+ `/dashboard/login`, `/logout`, `/api/overview`) | admin (session cookie) | the live dashboard |
//!
//! "buyer" is anyone while identity is off (the service trusts its
//! caller), else the holder of a buyer's JWT ([`identity`]). Every `/v1`
//! request but the admin's counts against its client address's rate limit
//! before anything else ([`crate::rate_limit`]).
//!
//! Every answer carries `X-Content-Type-Options: nosniff` and a
//! `Content-Security-Policy` with `frame-ancestors 'none'` (pages load
//! only this origin's script and style, and no page can be framed).

pub mod auth;
pub mod dashboard;
mod draws;
pub mod error;
pub mod identity;
pub mod json;
mod ops;
mod order_lookup;
mod orders;
mod purchases;
mod queue;
mod sales;

use std::net::SocketAddr;
use stockade_api::ErrorCode;

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, ObjectBuilder, Ref, RefOr, ResponseBuilder, Schema, Type};
use utoipa::{Modify, OpenApi};

use crate::state::AppState;
use error::ApiError;

/// The OpenAPI 3 document, generated from the handlers and their types.
#[derive(OpenApi)]
#[openapi(
    info(title = "Stockade", description = "Sell limited stock to a stampede, correctly."),
    paths(
        sales::create_sale, sales::get_sale, purchases::purchase,
        draws::enter, draws::my_entry, draws::get_draw, draws::entry_page,
        orders::get_order, orders::confirm_order, orders::cancel_order, orders::list_orders,
        queue::join_queue, queue::poll_ticket, queue::waiting_page,
        ops::healthz, ops::readyz, ops::metrics, ops::openapi,
    ),
    components(schemas(stockade_api::CreateSale, stockade_api::Sale,
                       stockade_api::PurchaseRequest, stockade_api::OrderBody,
                       stockade_api::OrderStatus, stockade_api::OrderPage,
                       stockade_api::ErrorBody, stockade_api::ErrorDetail,
                       stockade_api::ErrorCode, stockade_api::WaitingRoom,
                       stockade_api::JoinQueue, stockade_api::QueueTicket,
                       stockade_api::TicketStatus, stockade_api::ItemBody,
                       stockade_api::SkuStock, stockade_api::SkuView, stockade_api::Tier,
                       stockade_api::Allocation, stockade_api::DrawTerms,
                       stockade_api::EntryRequest, stockade_api::EntryBody,
                       stockade_api::DrawBody, stockade_api::DrawnEntry)),
    modifiers(&SecuritySchemes, &DoorResponses),
)]
pub struct ApiDoc;

/// The Content-Security-Policy of every answer without one of its own:
/// this origin's script, style and requests only, no framing, no plugins.
pub const PAGE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                            connect-src 'self'; img-src 'self'; form-action 'self'; \
                            frame-ancestors 'none'; base-uri 'none'";

/// The admin token, the payments token and the buyers' JWTs.
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        components.add_security_scheme(
            "payments_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The payment service's token (STOCKADE_PAYMENTS_TOKEN, \
                         --payments-token-file): it confirms held orders once paid",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "buyer_jwt",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A buyer's JWT (HS256, RS256 or ES256), needed only when the service \
                         runs with --jwt-secret or --jwt-public-key; the buyer is its sub",
                    ))
                    .build(),
            ),
        );
    }
}

/// The answers the front door can give on any route, added to every
/// operation they apply to, so the document lists every status a route
/// can really return: malformed paths and bodies, wrong methods, and the
/// per-client rate limit.
struct DoorResponses;

impl Modify for DoorResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in openapi.paths.paths.iter_mut() {
            let v1 = path.starts_with("/v1/");
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                add_door_responses(operation, v1);
                add_links(operation);
            }
        }
    }
}

/// OpenAPI links from the answers that carry an id to the routes that take
/// it, so clients (and a fuzzer's stateful phase) can follow them.
fn add_links(operation: &mut Operation) {
    let (statuses, field, param, targets): (&[&str], _, _, &[&str]) =
        match operation.operation_id.as_deref() {
            Some("create_sale") => (
                &["200", "201"],
                "id",
                "id",
                &["get_sale", "purchase", "list_orders"],
            ),
            Some("purchase") => (
                &["200", "201", "202"],
                "order_id",
                "order_id",
                &["get_order", "cancel_order"],
            ),
            _ => return,
        };
    for status in statuses {
        if let Some(RefOr::T(response)) = operation.responses.responses.get_mut(*status) {
            for target in targets {
                response.links.insert(
                    target.to_string(),
                    RefOr::T(
                        LinkBuilder::new()
                            .operation_id(*target)
                            .parameter(param, format!("$response.body#/{field}"))
                            .build(),
                    ),
                );
            }
        }
    }
}

/// [`document`] as JSON. utoipa 5 writes a link's fields in snake case
/// (`operation_id`); OpenAPI spells them `operationId`, `operationRef`,
/// `requestBody`.
pub fn document_json(state: &AppState) -> serde_json::Value {
    let mut doc = serde_json::to_value(document(state)).unwrap_or_default();
    let links = doc["paths"]
        .as_object_mut()
        .into_iter()
        .flat_map(|paths| paths.values_mut())
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut())
        .filter_map(|operation| operation.get_mut("responses")?.as_object_mut())
        .flat_map(|responses| responses.values_mut())
        .filter_map(|response| response.get_mut("links")?.as_object_mut())
        .flat_map(|links| links.values_mut())
        .filter_map(|link| link.as_object_mut());
    for link in links {
        for (snake, camel) in [
            ("operation_id", "operationId"),
            ("operation_ref", "operationRef"),
            ("request_body", "requestBody"),
        ] {
            if let Some(value) = link.remove(snake) {
                link.insert(camel.to_owned(), value);
            }
        }
    }
    doc
}

/// The OpenAPI document of this deployment: while identity is off, a
/// purchase must name its buyer (`user_id` required).
pub fn document(state: &AppState) -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    if state.identity().is_none()
        && let Some(components) = doc.components.as_mut()
        && let Some(RefOr::T(Schema::Object(request))) =
            components.schemas.get_mut("PurchaseRequest")
        && !request.required.iter().any(|r| r == "user_id")
    {
        request.required.push("user_id".to_owned());
    }
    doc
}

fn add_door_responses(operation: &mut Operation, v1: bool) {
    let has_path_params = operation
        .parameters
        .iter()
        .flatten()
        .any(|p| matches!(p.parameter_in, utoipa::openapi::path::ParameterIn::Path));
    let has_query = operation
        .parameters
        .iter()
        .flatten()
        .any(|p| matches!(p.parameter_in, utoipa::openapi::path::ParameterIn::Query));
    let has_body = operation.request_body.is_some();
    let mut add = |status: &str, description: &str, retry: bool| {
        let mut response = ResponseBuilder::new().description(description).content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        );
        if retry {
            response = response.header("Retry-After", seconds_header("seconds to wait"));
        }
        if status == "429" {
            response = response
                .header(
                    "RateLimit-Policy",
                    text_header("the limit that applied, e.g. \"ip\";q=20;w=10 (IETF draft)"),
                )
                .header(
                    "RateLimit",
                    text_header("what is left of it, e.g. \"ip\";r=0;t=3 (IETF draft)"),
                );
        }
        operation
            .responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| RefOr::T(response.build()));
    };
    if has_path_params || has_body {
        let what = match (has_path_params, has_body) {
            (true, true) => "invalid_path (not UTF-8), invalid_json or invalid_body",
            (true, false) => "invalid_path: a path segment is not UTF-8",
            _ => "invalid_json or invalid_body",
        };
        add("400", what, false);
    }
    if has_body {
        add("413", "payload_too_large: the body is over 16 KiB", false);
        add(
            "415",
            "unsupported_media_type: send Content-Type: application/json",
            false,
        );
    }
    if has_body || has_path_params || has_query {
        add(
            "422",
            "invalid_request: a field, path or query value is invalid (the field is named)",
            false,
        );
    }
    add(
        "405",
        "method_not_allowed: the path does not take that method",
        false,
    );
    if v1 {
        add(
            "429",
            "rate_limited: too many requests from this client address or buyer; nothing was done",
            true,
        );
    }
}

fn seconds_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        )
        .description(Some(description))
        .build()
}

fn text_header(description: &str) -> utoipa::openapi::header::Header {
    HeaderBuilder::new()
        .schema(ObjectBuilder::new().schema_type(Type::String))
        .description(Some(description))
        .build()
}

/// The per-client-address rate limit: before anything else of a `/v1`
/// request, so a flood costs a limiter check and nothing more. The admin
/// and the payment service are not limited. Needs the peer address (`ConnectInfo<SocketAddr>`,
/// which [`crate::Service::serve`] provides); a router driven without one
/// (`oneshot` in tests) has no client address to limit.
async fn limit_clients(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let limiter = state.rate_limiter();
    let headers = request.headers();
    let operator = auth::is_admin(&state, headers) || auth::is_payments(&state, headers);
    if !operator
        && let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>()
    {
        let client = limiter
            .limits()
            .trusted_proxies
            .client(peer.ip(), request.headers());
        if let Err(limited) = limiter.check_ip(client).await {
            return ApiError::from(limited).into_response();
        }
    }
    next.run(request).await
}

/// The service's router.
pub fn app(state: AppState) -> Router {
    let v1 = Router::new()
        .route("/v1/sales", post(sales::create_sale))
        .route("/v1/sales/{id}", get(sales::get_sale))
        .route("/v1/sales/{id}/purchases", post(purchases::purchase))
        .route("/v1/sales/{id}/entries", post(draws::enter))
        .route("/v1/sales/{id}/entries/me", get(draws::my_entry))
        .route("/v1/sales/{id}/draw", get(draws::get_draw))
        .route("/v1/sales/{id}/orders", get(orders::list_orders))
        .route("/v1/orders/{order_id}", get(orders::get_order))
        .route("/v1/orders/{order_id}/confirm", post(orders::confirm_order))
        .route("/v1/orders/{order_id}/cancel", post(orders::cancel_order))
        .route("/v1/sales/{id}/queue", post(queue::join_queue))
        .route("/v1/queue/{ticket}", get(queue::poll_ticket));
    // Without a per-address limit (the default) the layer would only look
    // at each request and pass it on: it is left out.
    let v1 = if state.rate_limiter().limits_ips() {
        v1.route_layer(middleware::from_fn_with_state(state.clone(), limit_clients))
    } else {
        v1
    };
    Router::new()
        .merge(v1)
        .route("/queue/{id}", get(queue::waiting_page))
        .route("/assets/queue.js", get(queue::waiting_page_script))
        .route("/draw/{id}", get(draws::entry_page))
        .route("/assets/draw.js", get(draws::entry_page_script))
        .route("/assets/queue.css", get(queue::waiting_page_style))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/openapi.json", get(ops::openapi))
        .route("/dashboard", get(dashboard::show))
        .route("/dashboard/login", post(dashboard::login))
        .route("/dashboard/logout", post(dashboard::logout))
        .route("/dashboard/api/overview", get(dashboard::overview))
        .route("/dashboard/assets/{file}", get(dashboard::asset))
        .fallback(|| async {
            ApiError::new(ErrorCode::NotFound, "no such route; see /openapi.json")
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                ErrorCode::MethodNotAllowed,
                "this route does not take that method; see /openapi.json",
            )
        })
        .layer(DefaultBodyLimit::max(json::MAX_BODY_BYTES))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(PAGE_CSP),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        // The request's span (see `telemetry`): continues the caller's
        // trace and records the answer's status; it also counts every
        // answer by status class (`stockade_http_responses_total`, the 5xx
        // alert's numerator and denominator).
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(crate::telemetry::request_span)
                .on_response(crate::telemetry::RecordStatus::default()),
        )
        .with_state(state)
}
