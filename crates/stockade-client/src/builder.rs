//! The settings and credentials a [`Client`] is built with.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderValue;

use stockade_core::redact::one_line;

use super::{Client, ClientError, Shared};

/// The settings a [`Client`] is built with.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    pub(super) base: String,
    pub(super) admin_token: Option<String>,
    pub(super) payments_token: Option<String>,
    pub(super) bearer: Option<String>,
    pub(super) timeout: Option<Duration>,
    pub(super) connect_timeout: Option<Duration>,
    pub(super) pool_max_idle_per_host: Option<usize>,
    pub(super) pool_idle_timeout: Option<Duration>,
    pub(super) tcp_nodelay: bool,
    pub(super) http: Option<reqwest::Client>,
}

impl ClientBuilder {
    /// The admin token: sent with the admin routes (and with a confirm
    /// when no payments token is set).
    pub fn admin_token(mut self, token: impl Into<String>) -> Self {
        self.admin_token = Some(token.into());
        self
    }

    /// The payment service's token: sent with a confirm.
    pub fn payments_token(mut self, token: impl Into<String>) -> Self {
        self.payments_token = Some(token.into());
        self
    }

    /// The buyer's bearer token (a JWT; or the admin token, to act for any
    /// buyer): sent with the buyer's routes.
    pub fn bearer_token(mut self, token: impl Into<String>) -> Self {
        self.bearer = Some(token.into());
        self
    }

    /// How long one request may take in all (none by default).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long connecting may take.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Idle keep-alive connections kept per host (as many as requests in
    /// flight, for a load generator).
    pub fn pool_max_idle_per_host(mut self, connections: usize) -> Self {
        self.pool_max_idle_per_host = Some(connections);
        self
    }

    /// How long an idle connection is kept.
    pub fn pool_idle_timeout(mut self, timeout: Duration) -> Self {
        self.pool_idle_timeout = Some(timeout);
        self
    }

    /// `TCP_NODELAY` on the connections (on by default).
    pub fn tcp_nodelay(mut self, on: bool) -> Self {
        self.tcp_nodelay = on;
        self
    }

    /// Send through this `reqwest` client (its own pool and timeouts: the
    /// connection settings above are then not used).
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// The client.
    pub fn build(self) -> Result<Client, ClientError> {
        let base = self.base.trim_end_matches('/').to_owned();
        let usable = reqwest::Url::parse(&base)
            .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
        if !usable {
            return Err(ClientError::Setup(format!(
                "the URL {base:?} must start with http:// or https:// (for example http://127.0.0.1:8080)"
            )));
        }
        let http = match self.http {
            Some(http) => http,
            None => {
                let mut builder = reqwest::Client::builder().tcp_nodelay(self.tcp_nodelay);
                if let Some(timeout) = self.timeout {
                    builder = builder.timeout(timeout);
                }
                if let Some(timeout) = self.connect_timeout {
                    builder = builder.connect_timeout(timeout);
                }
                if let Some(connections) = self.pool_max_idle_per_host {
                    builder = builder.pool_max_idle_per_host(connections);
                }
                if let Some(timeout) = self.pool_idle_timeout {
                    builder = builder.pool_idle_timeout(timeout);
                }
                builder.build().map_err(|e| {
                    ClientError::Setup(format!("building the HTTP client: {}", one_line(&e)))
                })?
            }
        };
        Ok(Client {
            http,
            shared: Arc::new(Shared {
                base,
                admin: self.admin_token.as_deref().map(bearer).transpose()?,
                payments: self.payments_token.as_deref().map(bearer).transpose()?,
                buyer: self.bearer.as_deref().map(bearer).transpose()?,
            }),
        })
    }
}

/// `Authorization: Bearer <token>`, kept out of debug output.
pub(super) fn bearer(token: &str) -> Result<HeaderValue, ClientError> {
    let mut value = HeaderValue::try_from(format!("Bearer {token}"))
        .map_err(|_| ClientError::Setup("a token must be visible ASCII".to_owned()))?;
    value.set_sensitive(true);
    Ok(value)
}
