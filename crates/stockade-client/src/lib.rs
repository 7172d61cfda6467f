//! A typed client of Stockade's HTTP API, for the bench, `stockade load`,
//! `stockade demo` and the tests: one method per route a program calls,
//! each answering the route's body type (from `stockade-api`) or a
//! [`ClientError`] that tells a failed transport, an error answer of the
//! API (its status, [`ErrorCode`](stockade_api::ErrorCode), message and `Retry-After`) and an
//! unreadable body apart. A crate of its own, not a feature of
//! `stockade-api`, so that the service, which links `stockade-api`, is
//! built with the same features in the product build and the test build.
//!
//! ```no_run
//! # async fn example() -> Result<(), stockade_client::ClientError> {
//! use stockade_client::{Client, Purchase};
//! use stockade_api::{CreateSale, ErrorCode};
//!
//! let admin = Client::builder("http://127.0.0.1:8080")
//!     .admin_token("the admin token")
//!     .build()?;
//! admin.create_sale(&CreateSale::new("drop-1", 100)).await?;
//! let buyers = admin.clone(); // the same connections
//! match buyers
//!     .purchase("drop-1", &Purchase::by("alice").idempotency_key("tap-1"))
//!     .await
//! {
//!     Ok(reply) => println!("{} {}", reply.status, reply.body.order_id),
//!     Err(error) if error.code() == Some(ErrorCode::SoldOut) => println!("sold out"),
//!     Err(error) => return Err(error),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Credentials: the admin token goes with the admin routes (creating a
//! sale, listing its orders), the payments token (or, without one, the
//! admin token) with a confirm, and the buyer's bearer token (a JWT, or
//! the admin token to act for any buyer) with the buyer's routes. A
//! [`Client`] is cheap to clone and shares its connections; give a clone
//! another buyer with [`Client::with_bearer`].
//!
//! # Layout
//! - `lib.rs`: the [`Client`] and one method per route.
//! - `builder.rs`: its settings and credentials ([`ClientBuilder`]).
//! - `request.rs`: what a call sends and answers ([`Purchase`], [`Reply`],
//!   [`Brief`]).
//! - `error.rs`: [`ClientError`] and the error answer it carries.

mod builder;
mod draws;
mod error;
mod request;

pub use builder::ClientBuilder;
pub use error::{ClientError, ErrorAnswer};
pub use request::{Brief, OrderRef, Purchase, Reply};

use std::fmt;
use std::sync::Arc;

use reqwest::Method;
use reqwest::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};
use serde::de::DeserializeOwned;

use stockade_api::{CreateSale, ErrorBody, OrderBody, OrderPage, QueueTicket, Sale};

use builder::bearer;
use error::unreadable;
use request::{CodeOnly, JoinBody, PurchaseBody};

/// Orders per page when [`Client::all_orders`] pages through a sale.
const ALL_ORDERS_PAGE: u32 = 1_000;
/// What the clones of a client share besides the connections.
struct Shared {
    base: String,
    admin: Option<HeaderValue>,
    payments: Option<HeaderValue>,
    buyer: Option<HeaderValue>,
}

/// Which credential a route takes.
#[derive(Clone, Copy)]
enum Credential {
    None,
    Admin,
    Payments,
    Buyer,
}

/// A client of one `stockade serve` (or a load balancer in front of
/// several). Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    shared: Arc<Shared>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.shared.base)
            .field("admin_token", &self.shared.admin.is_some())
            .field("payments_token", &self.shared.payments.is_some())
            .field("bearer_token", &self.shared.buyer.is_some())
            .finish()
    }
}

impl Client {
    /// A builder for the service at `base_url` (`http://host:port`).
    pub fn builder(base_url: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            admin_token: None,
            payments_token: None,
            bearer: None,
            timeout: None,
            connect_timeout: None,
            pool_max_idle_per_host: None,
            pool_idle_timeout: None,
            tcp_nodelay: true,
            http: None,
        }
    }

    /// A client of `base_url` without credentials or timeouts.
    pub fn new(base_url: impl Into<String>) -> Result<Self, ClientError> {
        Self::builder(base_url).build()
    }

    /// The service's base URL, without a trailing `/`.
    pub fn base_url(&self) -> &str {
        &self.shared.base
    }

    /// The same client (the same connections and other tokens) sending
    /// `token` as the buyer's bearer token.
    pub fn with_bearer(&self, token: &str) -> Result<Self, ClientError> {
        Ok(Self {
            http: self.http.clone(),
            shared: Arc::new(Shared {
                base: self.shared.base.clone(),
                admin: self.shared.admin.clone(),
                payments: self.shared.payments.clone(),
                buyer: Some(bearer(token)?),
            }),
        })
    }

    /// `POST /v1/sales` (admin): 201 created, 200 the identical sale
    /// existed.
    pub async fn create_sale(&self, sale: &CreateSale) -> Result<Reply<Sale>, ClientError> {
        let url = self.url(&["/v1/sales"], &[]);
        let request = self
            .request(Method::POST, url, Credential::Admin)
            .json(sale);
        read(send(request).await?).await
    }

    /// `GET /v1/sales/{id}`.
    pub async fn sale(&self, id: &str) -> Result<Sale, ClientError> {
        let url = self.url(&["/v1/sales/"], &[id]);
        body(self.request(Method::GET, url, Credential::None)).await
    }

    /// `POST /v1/sales/{id}/purchases`: 201 committed, 200 a replayed
    /// idempotency key, 202 accepted and not committed yet.
    pub async fn purchase(
        &self,
        sale: &str,
        purchase: &Purchase<'_>,
    ) -> Result<Reply<OrderBody>, ClientError> {
        read(send(self.purchase_request(sale, purchase)).await?).await
    }

    /// `POST /v1/sales/{id}/purchases`, for a load generator's hot loop:
    /// the status and the 2xx body read as `T` ([`OrderRef`] for the order
    /// id alone) or the error code, skipping the message and the other
    /// headers. An error answer is `Ok` here (its code is the outcome);
    /// `Err` is no answer, or a body that is not the API's.
    pub async fn purchase_brief<T: DeserializeOwned>(
        &self,
        sale: &str,
        purchase: &Purchase<'_>,
    ) -> Result<Brief<T>, ClientError> {
        let response = send(self.purchase_request(sale, purchase)).await?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(ClientError::Transport)?;
        let outcome = if status.is_success() {
            Ok(serde_json::from_slice::<T>(&bytes).map_err(|e| unreadable(status, &e, &bytes))?)
        } else {
            let body = serde_json::from_slice::<CodeOnly>(&bytes)
                .map_err(|e| unreadable(status, &e, &bytes))?;
            Err(body.error.code)
        };
        Ok(Brief { status, outcome })
    }

    /// `GET /v1/orders/{order_id}`: the order, `pending` while it is being
    /// committed.
    pub async fn order(&self, order_id: &str) -> Result<OrderBody, ClientError> {
        let url = self.url(&["/v1/orders/"], &[order_id]);
        body(self.request(Method::GET, url, Credential::Buyer)).await
    }

    /// `GET /v1/orders/{order_id}?wait=N` (long poll): a pending order is
    /// answered as soon as it is committed, or `pending` after `seconds`
    /// (0 to 30).
    pub async fn wait_for_order(
        &self,
        order_id: &str,
        seconds: u64,
    ) -> Result<OrderBody, ClientError> {
        let url = self.url(&["/v1/orders/"], &[order_id]);
        let request = self
            .request(Method::GET, url, Credential::Buyer)
            .query(&[("wait", seconds)]);
        body(request).await
    }

    /// `POST /v1/orders/{order_id}/confirm` (the payment service, with the
    /// payments token or else the admin token): `held` becomes
    /// `confirmed`.
    pub async fn confirm_order(&self, order_id: &str) -> Result<OrderBody, ClientError> {
        let url = self.url(&["/v1/orders/", "/confirm"], &[order_id]);
        let credential = if self.shared.payments.is_some() {
            Credential::Payments
        } else {
            Credential::Admin
        };
        body(self.request(Method::POST, url, credential)).await
    }

    /// `POST /v1/orders/{order_id}/cancel`: the items go back on sale.
    pub async fn cancel_order(&self, order_id: &str) -> Result<OrderBody, ClientError> {
        let url = self.url(&["/v1/orders/", "/cancel"], &[order_id]);
        body(self.request(Method::POST, url, Credential::Buyer)).await
    }

    /// `GET /v1/sales/{id}/orders?after=&limit=` (admin): one page of the
    /// sale's committed orders, in creation order.
    pub async fn orders_page(
        &self,
        sale: &str,
        after: Option<&str>,
        limit: Option<u32>,
    ) -> Result<OrderPage, ClientError> {
        let url = self.url(&["/v1/sales/", "/orders"], &[sale]);
        let mut request = self.request(Method::GET, url, Credential::Admin);
        if let Some(limit) = limit {
            request = request.query(&[("limit", limit)]);
        }
        if let Some(after) = after {
            request = request.query(&[("after", after)]);
        }
        body(request).await
    }

    /// Every committed order of a sale (admin), page after page.
    pub async fn all_orders(&self, sale: &str) -> Result<Vec<OrderBody>, ClientError> {
        let mut orders = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = self
                .orders_page(sale, after.as_deref(), Some(ALL_ORDERS_PAGE))
                .await?;
            orders.extend(page.orders);
            match page.next_after {
                Some(next) => after = Some(next),
                None => return Ok(orders),
            }
        }
    }

    /// `POST /v1/sales/{id}/queue`: joins the sale's waiting room (201 a
    /// new ticket, 200 the buyer's ticket). `user_id` None: the bearer
    /// token's buyer.
    pub async fn join_queue(
        &self,
        sale: &str,
        user_id: Option<&str>,
    ) -> Result<Reply<QueueTicket>, ClientError> {
        let url = self.url(&["/v1/sales/", "/queue"], &[sale]);
        let request = self
            .request(Method::POST, url, Credential::Buyer)
            .json(&JoinBody { user_id });
        read(send(request).await?).await
    }

    /// `GET /v1/queue/{ticket}`: where the ticket stands (its admission
    /// token once admitted).
    pub async fn poll_ticket(&self, ticket: &str) -> Result<QueueTicket, ClientError> {
        let url = self.url(&["/v1/queue/"], &[ticket]);
        body(self.request(Method::GET, url, Credential::None)).await
    }

    fn purchase_request(&self, sale: &str, purchase: &Purchase<'_>) -> reqwest::RequestBuilder {
        let url = self.url(&["/v1/sales/", "/purchases"], &[sale]);
        let mut request = self
            .request(Method::POST, url, Credential::Buyer)
            .json(&PurchaseBody {
                user_id: purchase.user_id,
                quantity: purchase.quantity,
                sku: purchase.sku,
            });
        if let Some(key) = purchase.idempotency_key {
            request = request.header("idempotency-key", key);
        }
        if let Some(token) = purchase.admission_token {
            request = request.header("admission-token", token);
        }
        if purchase.respond_async {
            request = request.header("prefer", "respond-async");
        }
        request
    }

    /// The base URL, then `parts` and `segments` in turn (each segment
    /// percent-encoded).
    fn url(&self, parts: &[&str], segments: &[&str]) -> String {
        let base = &self.shared.base;
        let length = base.len()
            + parts.iter().map(|p| p.len()).sum::<usize>()
            + segments.iter().map(|s| s.len() * 3).sum::<usize>();
        let mut url = String::with_capacity(length);
        url.push_str(base);
        for (i, part) in parts.iter().enumerate() {
            url.push_str(part);
            if let Some(segment) = segments.get(i) {
                push_segment(&mut url, segment);
            }
        }
        url
    }

    fn request(
        &self,
        method: Method,
        url: String,
        credential: Credential,
    ) -> reqwest::RequestBuilder {
        let request = self.http.request(method, url);
        let token = match credential {
            Credential::None => None,
            Credential::Admin => self.shared.admin.as_ref(),
            Credential::Payments => self.shared.payments.as_ref(),
            Credential::Buyer => self.shared.buyer.as_ref(),
        };
        match token {
            Some(token) => request.header(AUTHORIZATION, token.clone()),
            None => request,
        }
    }
}

/// Appends `segment`, percent-encoding all but RFC 3986's unreserved
/// characters (ids, order ids and tickets are made of those alone).
fn push_segment(url: &mut String, segment: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            url.push(char::from(byte));
        } else {
            url.push('%');
            url.push(char::from(HEX[usize::from(byte >> 4)]));
            url.push(char::from(HEX[usize::from(byte & 0xf)]));
        }
    }
}

async fn send(request: reqwest::RequestBuilder) -> Result<reqwest::Response, ClientError> {
    request.send().await.map_err(ClientError::Transport)
}

/// The 2xx body of a route whose status says nothing more.
async fn body<T: DeserializeOwned>(request: reqwest::RequestBuilder) -> Result<T, ClientError> {
    read(send(request).await?).await.map(|reply| reply.body)
}

/// A 2xx answer as `T`, or the error answer.
async fn read<T: DeserializeOwned>(response: reqwest::Response) -> Result<Reply<T>, ClientError> {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse().ok());
    let bytes = response.bytes().await.map_err(ClientError::Transport)?;
    if status.is_success() {
        let body = serde_json::from_slice(&bytes).map_err(|e| unreadable(status, &e, &bytes))?;
        return Ok(Reply { status, body });
    }
    let body: ErrorBody =
        serde_json::from_slice(&bytes).map_err(|e| unreadable(status, &e, &bytes))?;
    Err(ClientError::Api(Box::new(ErrorAnswer {
        status,
        retry_after,
        error: body.error,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_percent_encoded() {
        let mut url = String::new();
        push_segment(&mut url, "drop-1_a.b~");
        assert_eq!(url, "drop-1_a.b~");
        url.clear();
        push_segment(&mut url, "a/b c?é");
        assert_eq!(url, "a%2Fb%20c%3F%C3%A9");
    }

    #[test]
    fn urls_put_the_segments_between_the_parts() {
        let client = Client::new("http://127.0.0.1:9/").unwrap();
        assert_eq!(client.base_url(), "http://127.0.0.1:9");
        assert_eq!(
            client.url(&["/v1/sales/", "/purchases"], &["s 1"]),
            "http://127.0.0.1:9/v1/sales/s%201/purchases"
        );
        assert_eq!(
            client.url(&["/v1/sales"], &[]),
            "http://127.0.0.1:9/v1/sales"
        );
    }

    #[test]
    fn a_base_url_must_be_http() {
        let error = Client::new("127.0.0.1:8080").unwrap_err();
        assert!(matches!(error, ClientError::Setup(_)), "{error:?}");
        assert!(error.to_string().contains("http://"), "{error}");
        assert!(matches!(
            Client::new("ftp://host").unwrap_err(),
            ClientError::Setup(_)
        ));
    }

    #[test]
    fn a_purchase_body_leaves_out_a_missing_buyer() {
        let body = PurchaseBody {
            user_id: None,
            quantity: 2,
            sku: None,
        };
        assert_eq!(serde_json::to_string(&body).unwrap(), r#"{"quantity":2}"#);
        let purchase = Purchase::by("ann").quantity(3).idempotency_key("k");
        let body = PurchaseBody {
            user_id: purchase.user_id,
            quantity: purchase.quantity,
            sku: purchase.sku,
        };
        assert_eq!(
            serde_json::to_string(&body).unwrap(),
            r#"{"user_id":"ann","quantity":3}"#
        );
    }
}
