//! The typed client against the real service (`stockade serve` on the
//! embedded default, started in-process), and against canned answers for
//! what the service never sends (a body that is not the API's).

use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use stockade_api::{CreateSale, ErrorCode, OrderStatus, TicketStatus, WaitingRoom};
use stockade_client::{Client, ClientError, OrderRef, Purchase};
use stockade_server::config::{RawConfig, ServerConfig};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

const ADMIN: &str = "client-test-admin-token-0123456789";
const PAYMENTS: &str = "client-test-payments-token-0123456789";
const SECRET: &str = "a-client-test-secret-of-32-bytes-or-more";
const ISSUER: &str = "https://id.client.test";
const AUDIENCE: &str = "stockade-client-test";

/// A `stockade serve` on a free port, stopped when dropped.
struct Service {
    url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Service {
    async fn start(adjust: impl FnOnce(&mut RawConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = RawConfig::default();
        settings.http.listen = Some("127.0.0.1:0".into());
        settings.storage.data_dir = Some(dir.path().to_path_buf());
        settings.access.admin_token = Some(ADMIN.into());
        settings.access.payments_token = Some(PAYMENTS.into());
        adjust(&mut settings);
        let config = ServerConfig::resolve(settings, RawConfig::default(), None).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            stockade_server::run(listener, config, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Self {
            url,
            stop: Some(stop),
            task: Some(task),
            _dir: dir,
        }
    }

    /// A client with the admin and payments tokens.
    fn admin(&self) -> Client {
        Client::builder(&self.url)
            .admin_token(ADMIN)
            .payments_token(PAYMENTS)
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap()
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap();
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

pub(crate) fn api_error(error: &ClientError) -> (u16, ErrorCode) {
    let answer = error
        .answer()
        .unwrap_or_else(|| panic!("not an error answer: {error:?}"));
    (answer.status.as_u16(), answer.error.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sales_are_created_read_and_refused_with_their_error_codes() {
    let service = Service::start(|_| {}).await;
    let client = service.admin();
    let mut body = CreateSale::new("drop-1", 5);
    body.per_user_limit = Some(2);
    let created = client.create_sale(&body).await.unwrap();
    assert_eq!(created.status, 201);
    assert_eq!(created.body.id, "drop-1");
    assert_eq!(
        (
            created.body.stock,
            created.body.remaining,
            created.body.sold
        ),
        (5, 5, 0)
    );
    assert_eq!(created.body.per_user_limit, 2);
    let again = client.create_sale(&body).await.unwrap();
    assert_eq!(again.status, 200);

    let sale = client.sale("drop-1").await.unwrap();
    assert_eq!((sale.id.as_str(), sale.remaining), ("drop-1", 5));
    assert_eq!(sale.hold_seconds, None);

    let conflict = client
        .create_sale(&CreateSale::new("drop-1", 6))
        .await
        .unwrap_err();
    assert_eq!(api_error(&conflict), (409, ErrorCode::SaleConflict));
    assert!(
        conflict.answer().unwrap().error.message.contains("drop-1"),
        "{conflict}"
    );
    assert_eq!(conflict.retry_after(), None);

    let unknown = client.sale("no-such-sale").await.unwrap_err();
    assert_eq!(api_error(&unknown), (404, ErrorCode::UnknownSale));
    assert_eq!(unknown.status().map(|s| s.as_u16()), Some(404));
    assert_eq!(unknown.code(), Some(ErrorCode::UnknownSale));

    let invalid = client
        .create_sale(&CreateSale::new("bad id!", 1))
        .await
        .unwrap_err();
    assert_eq!(api_error(&invalid), (422, ErrorCode::InvalidRequest));
    assert!(invalid.answer().unwrap().error.field.is_some(), "{invalid}");

    // Without the admin token, the admin routes are refused.
    let anonymous = Client::new(&service.url).unwrap();
    let refused = anonymous
        .create_sale(&CreateSale::new("drop-2", 1))
        .await
        .unwrap_err();
    assert_eq!(api_error(&refused), (401, ErrorCode::Unauthorized));
    let refused = anonymous
        .orders_page("drop-1", None, None)
        .await
        .unwrap_err();
    assert_eq!(api_error(&refused), (401, ErrorCode::Unauthorized));
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purchases_are_answered_replayed_and_looked_up() {
    let service = Service::start(|_| {}).await;
    let client = service.admin();
    let mut body = CreateSale::new("drop", 3);
    body.per_user_limit = Some(2);
    client.create_sale(&body).await.unwrap();

    let purchase = Purchase::by("ann").quantity(2).idempotency_key("ann-1");
    let bought = client.purchase("drop", &purchase).await.unwrap();
    assert_eq!(bought.status, 201);
    let order = bought.body;
    assert_eq!(
        (
            order.sale_id.as_str(),
            order.user_id.as_str(),
            order.quantity
        ),
        ("drop", "ann", 2)
    );
    assert_eq!(order.status, OrderStatus::Confirmed);
    assert_eq!(order.remaining, Some(1));

    // The same key again: the same order, 200.
    let replayed = client.purchase("drop", &purchase).await.unwrap();
    assert_eq!(replayed.status, 200);
    assert_eq!(replayed.body.order_id, order.order_id);

    // The same key for another purchase.
    let reused = client
        .purchase("drop", &Purchase::by("ann").idempotency_key("ann-1"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&reused), (422, ErrorCode::IdempotencyKeyReused));

    // Over the per-user limit, and more than is left.
    let limited = client
        .purchase("drop", &Purchase::by("ann"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&limited), (409, ErrorCode::LimitExceeded));
    let short = client
        .purchase("drop", &Purchase::by("bob").quantity(2))
        .await
        .unwrap_err();
    assert_eq!(api_error(&short), (409, ErrorCode::InsufficientStock));

    let found = client.order(&order.order_id).await.unwrap();
    assert_eq!(found.order_id, order.order_id);
    assert_eq!((found.status, found.quantity), (OrderStatus::Confirmed, 2));
    assert_eq!(found.remaining, None);

    let cancelled = client.cancel_order(&order.order_id).await.unwrap();
    assert_eq!(cancelled.status, OrderStatus::Cancelled);
    assert_eq!(client.sale("drop").await.unwrap().remaining, 3);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brief_purchase_tells_the_order_id_or_the_error_code() {
    let service = Service::start(|_| {}).await;
    let client = service.admin();
    client
        .create_sale(&CreateSale::new("one", 1))
        .await
        .unwrap();
    let bought = client
        .purchase_brief::<OrderRef>("one", &Purchase::by("ann"))
        .await
        .unwrap();
    assert_eq!(bought.status, 201);
    let order = bought.outcome.unwrap();
    assert_eq!(order.order_id.len(), 36, "{order:?}");
    assert_eq!(client.order(&order.order_id).await.unwrap().user_id, "ann");

    let sold_out = client
        .purchase_brief::<OrderRef>("one", &Purchase::by("bob"))
        .await
        .unwrap();
    assert_eq!(sold_out.status, 409);
    assert_eq!(sold_out.outcome, Err(ErrorCode::SoldOut));
    let unknown = client
        .purchase_brief::<OrderRef>("nowhere", &Purchase::by("bob"))
        .await
        .unwrap();
    assert_eq!(
        (unknown.status.as_u16(), unknown.outcome),
        (404, Err(ErrorCode::UnknownSale))
    );
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_orders_are_followed_and_holds_confirmed_with_the_payments_token() {
    let service = Service::start(|_| {}).await;
    let client = service.admin();
    let mut body = CreateSale::new("hold", 10);
    body.hold_seconds = Some(600);
    let sale = client.create_sale(&body).await.unwrap().body;
    assert_eq!(sale.hold_seconds, Some(600));

    let early = client
        .purchase("hold", &Purchase::by("ann").respond_async())
        .await
        .unwrap();
    assert_eq!(early.status, 202);
    assert_eq!(early.body.status, OrderStatus::Pending);
    let order_id = early.body.order_id;
    let committed = client.wait_for_order(&order_id, 10).await.unwrap();
    assert_eq!(committed.order_id, order_id);
    assert_eq!(committed.status, OrderStatus::Held);
    assert!(committed.expires_at.is_some(), "{committed:?}");

    // A buyer's client has neither token: its confirm is refused.
    let buyer = Client::new(&service.url).unwrap();
    let refused = buyer.confirm_order(&order_id).await.unwrap_err();
    assert_eq!(api_error(&refused), (401, ErrorCode::Unauthenticated));

    // The payments token confirms (and the admin's client sends it).
    let confirmed = client.confirm_order(&order_id).await.unwrap();
    assert_eq!(confirmed.status, OrderStatus::Confirmed);
    let payments = Client::builder(&service.url)
        .payments_token(PAYMENTS)
        .build()
        .unwrap();
    let again = payments.confirm_order(&order_id).await.unwrap();
    assert_eq!(again.status, OrderStatus::Confirmed);

    // Cancelled, it cannot be confirmed.
    let other = client
        .purchase("hold", &Purchase::by("bob"))
        .await
        .unwrap()
        .body;
    assert_eq!(other.status, OrderStatus::Held);
    client.cancel_order(&other.order_id).await.unwrap();
    let cancelled = client.confirm_order(&other.order_id).await.unwrap_err();
    assert_eq!(api_error(&cancelled), (409, ErrorCode::OrderCancelled));
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_are_listed_page_by_page() {
    let service = Service::start(|_| {}).await;
    let client = service.admin();
    client
        .create_sale(&CreateSale::new("listed", 10))
        .await
        .unwrap();
    let mut bought = Vec::new();
    for buyer in ["u1", "u2", "u3"] {
        let order = client
            .purchase("listed", &Purchase::by(buyer))
            .await
            .unwrap();
        bought.push(order.body.order_id);
    }
    let first = client.orders_page("listed", None, Some(2)).await.unwrap();
    assert_eq!(first.orders.len(), 2);
    assert_eq!(first.orders[0].order_id, bought[0]);
    assert_eq!(first.orders[1].order_id, bought[1]);
    let next = first.next_after.clone().expect("a second page");
    let second = client
        .orders_page("listed", Some(&next), Some(2))
        .await
        .unwrap();
    assert_eq!(second.orders.len(), 1);
    assert_eq!(second.orders[0].order_id, bought[2]);
    assert_eq!(second.next_after, None);
    let all = client.all_orders("listed").await.unwrap();
    let ids: Vec<&str> = all.iter().map(|o| o.order_id.as_str()).collect();
    assert_eq!(ids, bought.iter().map(String::as_str).collect::<Vec<_>>());
    let invalid = client
        .orders_page("listed", None, Some(0))
        .await
        .unwrap_err();
    assert_eq!(api_error(&invalid), (422, ErrorCode::InvalidRequest));
    assert_eq!(
        invalid.answer().unwrap().error.field.as_deref(),
        Some("limit")
    );
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_answer_carries_its_retry_after() {
    let service = Service::start(|_| {}).await;
    let client = service.admin();
    // An order id minted just now that no instance committed: 404 with
    // Retry-After: 1 (another instance may not have committed it yet).
    let fresh = uuid::Uuid::now_v7().to_string();
    let error = client.order(&fresh).await.unwrap_err();
    assert_eq!(api_error(&error), (404, ErrorCode::UnknownOrder));
    assert_eq!(error.retry_after(), Some(1));
    assert!(
        error.to_string().contains("HTTP 404 unknown_order"),
        "{error}"
    );
    assert!(error.to_string().contains("retry after 1 s"), "{error}");
    assert!(!error.is_transport());
    // An old id: no Retry-After.
    let old = "00000000-0000-7000-8000-000000000000";
    let error = client.order(old).await.unwrap_err();
    assert_eq!(api_error(&error), (404, ErrorCode::UnknownOrder));
    assert_eq!(error.retry_after(), None);
    service.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_room_is_joined_polled_and_bought_through() {
    let service = Service::start(|_| {}).await;
    let client = service.admin();
    let mut body = CreateSale::new("room", 5);
    body.waiting_room = Some(WaitingRoom {
        admit_per_second: 100,
        admission_ttl_seconds: 60,
        admission_factor: 1.5,
    });
    let sale = client.create_sale(&body).await.unwrap().body;
    assert_eq!(sale.waiting_room.map(|r| r.admit_per_second), Some(100));

    let refused = client
        .purchase("room", &Purchase::by("ann"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&refused), (403, ErrorCode::AdmissionRequired));

    let joined = client.join_queue("room", Some("ann")).await.unwrap();
    assert_eq!(joined.status, 201);
    assert_eq!(joined.body.sale_id, "room");
    let ticket = joined.body.ticket.clone();
    let again = client.join_queue("room", Some("ann")).await.unwrap();
    assert_eq!(
        (again.status.as_u16(), again.body.ticket),
        (200, ticket.clone())
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    let token = loop {
        let polled = client.poll_ticket(&ticket).await.unwrap();
        assert_eq!(polled.ticket, ticket);
        if polled.status == TicketStatus::Admitted {
            break polled.admission_token.expect("an admitted ticket's token");
        }
        assert_eq!(polled.status, TicketStatus::Waiting, "{polled:?}");
        assert!(Instant::now() < deadline, "never admitted: {polled:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let bought = client
        .purchase("room", &Purchase::by("ann").admission_token(&token))
        .await
        .unwrap();
    assert_eq!(bought.status, 201);
    assert_eq!(bought.body.user_id, "ann");

    let unknown = client.join_queue("nowhere", Some("ann")).await.unwrap_err();
    assert_eq!(api_error(&unknown), (404, ErrorCode::UnknownSale));
    let unknown = client
        .poll_ticket("room.0000000000000000.YW5u.00000000000000000000000000000000")
        .await
        .unwrap_err();
    assert_eq!(api_error(&unknown), (404, ErrorCode::UnknownTicket));
    service.stop().await;
}

fn jwt(sub: &str) -> String {
    let exp = chrono::Utc::now().timestamp() + 3600;
    let claims = serde_json::json!({"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "exp": exp});
    encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(SECRET.as_bytes()),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buyer_buys_with_the_bearer_token() {
    let service = Service::start(|c| {
        c.identity.jwt_secret = Some(SECRET.into());
        c.identity.jwt_issuer = Some(ISSUER.into());
        c.identity.jwt_audience = Some(AUDIENCE.into());
    })
    .await;
    let admin = service.admin();
    admin
        .create_sale(&CreateSale::new("verified", 5))
        .await
        .unwrap();

    let anonymous = admin
        .purchase("verified", &Purchase::by("ann"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&anonymous), (401, ErrorCode::Unauthenticated));

    let ann = admin.with_bearer(&jwt("ann")).unwrap();
    let order = ann
        .purchase("verified", &Purchase::as_caller())
        .await
        .unwrap()
        .body;
    assert_eq!(order.user_id, "ann");
    assert_eq!(ann.order(&order.order_id).await.unwrap().user_id, "ann");
    let mismatch = ann
        .purchase("verified", &Purchase::by("bob"))
        .await
        .unwrap_err();
    assert_eq!(api_error(&mismatch), (403, ErrorCode::UserMismatch));

    // Another buyer does not see ann's order; the admin token acts for
    // anyone.
    let bob = ann.with_bearer(&jwt("bob")).unwrap();
    let hidden = bob.order(&order.order_id).await.unwrap_err();
    assert_eq!(api_error(&hidden).1, ErrorCode::UnknownOrder);
    let as_admin = ann.with_bearer(ADMIN).unwrap();
    let seen = as_admin.order(&order.order_id).await.unwrap();
    assert_eq!(seen.user_id, "ann");
    // The clones kept the admin token for the admin routes.
    assert_eq!(bob.all_orders("verified").await.unwrap().len(), 1);
    service.stop().await;
}
