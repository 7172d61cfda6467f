//! `GET /dashboard`: a live page for the people running a sale.
//!
//! | route | what |
//! | --- | --- |
//! | `GET /dashboard` | the dashboard, or the login form without a session |
//! | `POST /dashboard/login` | form field `token` (the admin token): sets the session cookie |
//! | `POST /dashboard/logout` | clears the session cookie |
//! | `GET /dashboard/api/overview` | the numbers the page polls every second (session cookie) |
//! | `GET /dashboard/assets/{file}` | the page's script and style sheet |
//!
//! The admin token travels once, in the body of the login form; the
//! browser keeps only a signed, expiring session (any instance sharing the
//! admin token accepts it) in an HttpOnly, SameSite=Strict cookie scoped
//! to `/dashboard` (see [`crate::sessions`]), marked `Secure`
//! when `--public-url` is https (a request header never decides that: any
//! client can send one). Failed logins are logged and limited per client
//! across instances ([`crate::login_attempts`], in the store): the sixth
//! in a minute is 429. The page is
//! plain HTML, CSS and JavaScript embedded in the binary: no framework, no
//! build step, nothing loaded from elsewhere (the Content-Security-Policy
//! allows only this origin).

use std::net::SocketAddr;
use stockade_api::ErrorCode;

use axum::Extension;
use axum::Form;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use stockade_core::SaleId;
use stockade_core::sale::Window;

use super::error::ApiError;
use crate::activity::{self, Latency, SaleReport};
use crate::login_attempts;
use crate::purchase::{Answered, Class};
use crate::state::AppState;
use stockade_store::arbiter::SaleState;
use stockade_store::authority::Authority;

/// The session cookie's name.
pub const COOKIE: &str = "stockade_session";
/// The most sales the overview lists (open ones first).
pub const MAX_SALES: usize = 100;

const LOGIN_HTML: &str = include_str!("../../assets/login.html");
const DASHBOARD_HTML: &str = include_str!("../../assets/dashboard.html");
const DASHBOARD_JS: &str = include_str!("../../assets/dashboard.js");
const DASHBOARD_CSS: &str = include_str!("../../assets/dashboard.css");

/// Only this origin's script and style; no framing.
const CSP: &str = super::PAGE_CSP;

/// An HTML page with the dashboard's security headers.
fn page(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secure(headers);
    response
}

fn secure(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

fn login_page(status: StatusCode, error: &str) -> Response {
    let error = if error.is_empty() {
        String::new()
    } else {
        format!("<p class=\"error\" role=\"alert\" id=\"login-error\">{error}</p>")
    };
    page(status, LOGIN_HTML.replace("<!--error-->", &error))
}

/// The session id the request's cookie carries, if any.
fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Whether the request carries a live session.
fn signed_in(state: &AppState, headers: &HeaderMap) -> bool {
    session_cookie(headers).is_some_and(|id| state.sessions().is_valid(id, state.clock().now()))
}

/// The client a login comes from, as the rate limiter names it (the
/// peer, or what a trusted proxy says); None without a peer address (a
/// router driven in-process).
fn login_client(state: &AppState, peer: Option<SocketAddr>, headers: &HeaderMap) -> Option<String> {
    let peer = peer?;
    let trusted = &state.rate_limiter().limits().trusted_proxies;
    Some(crate::rate_limit::client_ip::limit_key(
        trusted.client(peer.ip(), headers),
    ))
}

/// `GET /dashboard`.
pub async fn show(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if signed_in(&state, &headers) {
        page(StatusCode::OK, DASHBOARD_HTML.to_owned())
    } else {
        login_page(StatusCode::OK, "")
    }
}

/// The login form's body.
#[derive(Debug, Deserialize)]
pub struct Login {
    token: String,
}

/// `POST /dashboard/login`.
pub async fn login(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    form: Result<Form<Login>, axum::extract::rejection::FormRejection>,
) -> Response {
    let now = state.clock().now();
    let client = login_client(&state, peer.map(|Extension(ConnectInfo(p))| p), &headers);
    let locked = match &client {
        Some(client) => login_attempts::locked_for(state.store(), client, now).await,
        None => Ok(None),
    };
    let locked = match locked {
        Ok(locked) => locked,
        Err(error) => return store_unavailable(&error),
    };
    if let Some(wait) = locked {
        let seconds = wait.as_secs().max(1);
        let mut response = login_page(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Too many failed logins from this address: try again in {seconds} seconds."),
        );
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_str(&seconds.to_string()).expect("digits"),
        );
        return response;
    }
    let Ok(Form(Login { token })) = form else {
        return login_page(
            StatusCode::BAD_REQUEST,
            "Send the login form: a field named token with the admin token.",
        );
    };
    if !super::auth::token_matches(&state, token.trim()) {
        if let Some(client) = &client
            && let Err(error) = login_attempts::failed(state.store(), client, now).await
        {
            return store_unavailable(&error);
        }
        tracing::warn!(
            client = client.as_deref().unwrap_or("unknown"),
            "failed dashboard login: not the admin token"
        );
        return login_page(
            StatusCode::UNAUTHORIZED,
            "That is not the admin token. Use the value of STOCKADE_ADMIN_TOKEN (or the token printed at start).",
        );
    }
    if let Some(client) = &client
        && let Err(error) = login_attempts::succeeded(state.store(), client).await
    {
        return store_unavailable(&error);
    }
    let id = state.sessions().open(now);
    let secure = if state.secure_cookies() {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{COOKIE}={id}; Path=/dashboard; Max-Age={}; HttpOnly; SameSite=Strict{secure}",
        state.sessions().ttl().as_secs()
    );
    let mut response = Redirect::to("/dashboard").into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    secure_headers(response)
}

/// The login form again when the failed logins cannot be read or
/// written: a login is not let through unthrottled.
fn store_unavailable(error: &stockade_store::StoreError) -> Response {
    tracing::warn!(%error, "dashboard login refused: the failed logins are kept in the store");
    login_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "The order store cannot be reached (it counts failed logins): try again shortly.",
    )
}

fn secure_headers(mut response: Response) -> Response {
    secure(response.headers_mut());
    response
}

/// `POST /dashboard/logout`.
/// Clears the cookie in this browser (nothing is kept server-side: see
/// [`crate::sessions`] for how every session is ended at once).
pub async fn logout() -> Response {
    let mut response = Redirect::to("/dashboard").into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&format!(
            "{COOKIE}=; Path=/dashboard; Max-Age=0; HttpOnly; SameSite=Strict"
        ))
        .expect("a valid header"),
    );
    secure_headers(response)
}

/// `GET /dashboard/assets/{file}`.
pub async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "dashboard.js" => (DASHBOARD_JS, "text/javascript; charset=utf-8"),
        "dashboard.css" => (DASHBOARD_CSS, "text/css; charset=utf-8"),
        _ => {
            return ApiError::new(
                ErrorCode::NotFound,
                "no such dashboard asset (dashboard.js, dashboard.css)",
            )
            .into_response();
        }
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// One SKU of a sale on the dashboard.
#[derive(Debug, Serialize)]
pub struct SkuLine {
    /// SKU id.
    pub id: String,
    /// Its stock.
    pub stock: u32,
    /// Its items sold.
    pub sold: u32,
    /// Its items left.
    pub remaining: u32,
}

/// One sale on the dashboard.
#[derive(Debug, Serialize)]
pub struct SaleView {
    /// Sale id.
    pub id: String,
    /// Total stock.
    pub stock: u32,
    /// Items sold (stock − remaining, as the deciding authority sees it:
    /// orders still being committed included).
    pub sold: u32,
    /// Items left.
    pub remaining: u32,
    /// Items in committed, live orders (the store).
    pub committed: u32,
    /// Per-user limit.
    pub per_user_limit: u32,
    /// Each SKU's stock, as the deciding authority sees it.
    pub skus: Vec<SkuLine>,
    /// The window: `not_started`, `selling`, `sold_out` or `ended`.
    pub status: &'static str,
    /// Who decides its purchases: `selling` (the engine), `rebuilding`
    /// (503 until the engine is rebuilt from the store), `fallback` (the
    /// PostgreSQL store, while the engine is unavailable) or `store`
    /// (`--engine postgres`).
    pub engine_state: &'static str,
    /// Purchases per second, last 10 s.
    pub purchases_per_second: f64,
    /// Rejections per second, last 10 s.
    pub rejections_per_second: f64,
    /// Rejections by reason since this process started.
    pub rejections: serde_json::Map<String, Value>,
    /// Every answer by outcome since this process started.
    pub outcomes: serde_json::Map<String, Value>,
    /// Purchase latency over the last 30–60 s.
    pub latency: Option<Latency>,
    /// The chart: 5-second slots over the last five minutes.
    pub history: Vec<activity::SlotCounts>,
    /// WAITING ROOM: buyers waiting to be let in, once the waiting room
    /// exists (None: no waiting room for this sale, and the page shows
    /// nothing).
    pub waiting_room: Option<u64>,
}

fn counts(pairs: impl Iterator<Item = (&'static str, u64)>) -> serde_json::Map<String, Value> {
    pairs.map(|(k, v)| (k.to_owned(), json!(v))).collect()
}

/// `GET /dashboard/api/overview`: everything the page shows.
pub async fn overview(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if !signed_in(&state, &headers) {
        return Err(ApiError::new(
            ErrorCode::Unauthorized,
            "sign in at /dashboard first (the session is missing or expired)",
        ));
    }
    let now = state.clock().now();
    let retention = chrono::TimeDelta::from_std(crate::metrics::retention()).unwrap_or_default();
    let mut listed = state.store().sale_states(Some(now - retention)).await?;
    // Open sales first, then those that have not started, then the ended.
    listed.sort_by_key(|s| match s.spec.window_at(now) {
        Window::Open => 0,
        Window::NotStarted => 1,
        Window::Ended => 2,
    });
    let not_shown = listed.len().saturating_sub(MAX_SALES);
    let mut sales = Vec::with_capacity(listed.len().min(MAX_SALES));
    for current in listed.into_iter().take(MAX_SALES) {
        sales.push(sale_view(&state, current, now).await);
    }
    let body = json!({
        "generated_at": now,
        "slot_seconds": activity::SLOT.as_secs(),
        "instance": {
            "engine": state.engine().name(),
            "fallback_enabled": state.has_fallback(),
            "circuit": if state.breaker().is_open() { "open" } else { "closed" },
            "ready": state.is_started(),
            "rebuilding_sales": state.book().rebuilding_count(),
            "writer": {
                "queue_depth": state.queue().in_flight_count(),
                "commit_latency": state.activity().commit_latency(),
            },
        },
        "sales": sales,
        "sales_not_shown": not_shown,
    });
    let mut response = axum::Json(body).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(response)
}

async fn sale_view(
    state: &AppState,
    current: SaleState,
    now: chrono::DateTime<chrono::Utc>,
) -> SaleView {
    let id: SaleId = current.spec.id().clone();
    let rebuilding = state.book().is_rebuilding(&id);
    let engine_state = match current.authority {
        _ if rebuilding => "rebuilding",
        Authority::Fallback => "fallback",
        Authority::Primary if state.engine_apart() => "selling",
        Authority::Primary => "store",
    };
    // The deciding authority's stock: the engine's counts orders still
    // being committed; the store's when it decides or the engine is away.
    let mut remaining = current.remaining();
    let mut sku_left = current.sku_remaining();
    if current.authority == Authority::Primary
        && !rebuilding
        && state.engine_apart()
        && let Ok(Some(snapshot)) = state.engine().snapshot(&id).await
    {
        remaining = snapshot.remaining;
        sku_left = snapshot.skus.iter().map(|sku| sku.remaining).collect();
    }
    let skus = current
        .spec
        .skus()
        .iter()
        .zip(&sku_left)
        .map(|(sku, left)| SkuLine {
            id: sku.id.to_string(),
            stock: sku.stock,
            sold: sku.stock.saturating_sub(*left),
            remaining: *left,
        })
        .collect();
    let status = match current.spec.window_at(now) {
        Window::NotStarted => "not_started",
        Window::Ended => "ended",
        Window::Open if remaining == 0 => "sold_out",
        Window::Open => "selling",
    };
    let report: SaleReport = state.activity().sale(id.as_str()).unwrap_or(SaleReport {
        outcomes: Default::default(),
        purchases_per_second: 0.0,
        rejections_per_second: 0.0,
        latency: None,
        history: Vec::new(),
    });
    let rejections = counts(
        report
            .outcomes
            .iter()
            .filter(|(k, _)| Answered::parse(k).is_some_and(|a| a.class() == Class::Rejected))
            .map(|(k, v)| (*k, *v)),
    );
    SaleView {
        id: id.to_string(),
        stock: current.spec.total_stock(),
        sold: current.spec.total_stock().saturating_sub(remaining),
        remaining,
        committed: current.sold,
        per_user_limit: current.spec.per_user_limit(),
        skus,
        status,
        engine_state,
        purchases_per_second: report.purchases_per_second,
        rejections_per_second: report.rejections_per_second,
        rejections,
        outcomes: counts(report.outcomes.iter().map(|(k, v)| (*k, *v))),
        latency: report.latency,
        history: report.history,
        // Tickets waiting, as of this instance's last tick of the room.
        waiting_room: state.waiting_rooms().waiting(&id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; stockade_session=abc; b=2"),
        );
        assert_eq!(session_cookie(&headers), Some("abc"));
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("xstockade_session=abc"),
        );
        assert_eq!(session_cookie(&headers), None);
    }
}
