//! `stockade load --url`: the same crowd, measured the same way, sent over
//! HTTP to a running `stockade serve`.
//!
//! It creates its own sale through the admin API (`POST /v1/sales`), sends
//! the workload as `POST /v1/sales/{id}/purchases` over `concurrency`
//! keep-alive connections with distinct user ids, counts status codes, and
//! then checks the result against `GET /v1/sales/{id}` and the admin order
//! list (`GET /v1/sales/{id}/orders`): stock that adds up, no buyer with two
//! orders, and every acknowledged order id committed.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::json;
use stockade_api::{CreateSale, ErrorCode, OrderBody, OrderStatus, SkuStock};
use stockade_client::{Client, ClientBuilder, ClientError, OrderRef, Purchase};

use crate::check::Observed;
use crate::driver;
use crate::report::{BenchResult, ServerWork};
use crate::scenario::{Workload, skus};
use crate::strategy::{Answer, Purchaser, StrategyError, Verification};

/// Keep-alive connections when `--concurrency` is not given.
pub const DEFAULT_CONNECTIONS: usize = 256;
/// How long one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long to wait for answered-but-pending (202) orders to be committed
/// before checking the store.
pub(crate) const SETTLE_TIMEOUT: Duration = Duration::from_secs(10);

/// What to send where.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The service, `http://host:port`.
    pub url: String,
    /// The admin bearer token (to create the sale and list its orders).
    pub admin_token: String,
    /// The crowd.
    pub workload: Workload,
    /// Create the sale with this payment hold (orders answered `held`).
    pub hold_seconds: Option<u64>,
}

/// Why a load run could not take place.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The URL or client settings are unusable.
    #[error("{0}")]
    Setup(String),
    /// The service refused or failed a setup call.
    #[error("{0}")]
    Service(String),
}

/// The result of a load run: the usual measures plus status codes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    /// Measures and checks, as for `stockade bench` (`strategy` is `http`).
    #[serde(flatten)]
    pub result: BenchResult,
    /// Answers by HTTP status (and error code for 4xx/5xx), e.g.
    /// `201`, `409 sold_out`.
    pub statuses: BTreeMap<String, u64>,
    /// The sale the run created (`load-<uuid>`).
    pub sale: String,
}

impl LoadReport {
    /// `{"results": [...]}`, the shape `stockade bench --json` prints.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(&json!({ "results": [self] }))
            .expect("a report always serializes")
    }

    /// The table, what broke, and the status codes.
    pub fn to_markdown(&self) -> String {
        let report = crate::report::BenchReport {
            results: vec![self.result.clone()],
        };
        let mut out = report.to_markdown();
        out.push_str("\n| status | answers |\n| --- | ---: |\n");
        for (status, count) in &self.statuses {
            out.push_str(&format!("| {status} | {count} |\n"));
        }
        out
    }
}

/// How a successful purchase answer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Success {
    /// `stockade serve`: 201 or 202 with the order (`order_id`).
    Order,
    /// The bare baseline of `stockade bench http`: 201 with the request
    /// echoed (`sale_id`, `user_id`, `quantity`).
    Echo,
}

/// The service's sale: one purchase is one HTTP request.
pub(crate) struct HttpSale {
    pub(crate) client: Client,
    pub(crate) sale: String,
    pub(crate) success: Success,
    pub(crate) statuses: Mutex<BTreeMap<String, u64>>,
    pub(crate) acknowledged: Mutex<Vec<String>>,
    /// SKUs of the sale ([`skus`]): each buyer names theirs when above 1.
    pub(crate) skus: u32,
}

/// The baseline's answer: the purchase, echoed.
#[derive(Deserialize)]
struct EchoAnswer {
    sale_id: String,
    user_id: String,
    quantity: u32,
}

impl HttpSale {
    /// A sale `sale` of the service `client` calls, not yet created.
    pub(crate) fn new(client: Client, sale: String, success: Success) -> Self {
        Self {
            client,
            sale,
            success,
            statuses: Mutex::new(BTreeMap::new()),
            acknowledged: Mutex::new(Vec::new()),
            skus: 1,
        }
    }

    /// The same, for a sale of `skus` SKUs ([`skus::specs`]).
    pub(crate) fn with_skus(self, skus: u32) -> Self {
        Self { skus, ..self }
    }

    /// Answers by status so far.
    pub(crate) fn statuses(&self) -> BTreeMap<String, u64> {
        self.statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn count(&self, status: String) {
        *self
            .statuses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(status)
            .or_default() += 1;
    }

    async fn decide(&self, buyer: &str) -> Result<Answer, ClientError> {
        let sku = skus::of_buyer(buyer, self.skus);
        let purchase = match &sku {
            Some(sku) => Purchase::by(buyer).sku(sku),
            None => Purchase::by(buyer),
        };
        if self.success == Success::Echo {
            let answer = self
                .client
                .purchase_brief::<EchoAnswer>(&self.sale, &purchase)
                .await?;
            if let (StatusCode::CREATED, Ok(echo)) = (answer.status, &answer.outcome) {
                self.count(answer.status.as_u16().to_string());
                if echo.sale_id != self.sale || echo.user_id != buyer || echo.quantity != 1 {
                    return Ok(Answer::Failed(format!(
                        "the baseline echoed {}/{}/{} for {}/{buyer}/1",
                        echo.sale_id, echo.user_id, echo.quantity, self.sale
                    )));
                }
                return Ok(Answer::Purchased);
            }
            return Ok(self.refused(answer.status, answer.outcome.err()));
        }
        let answer = self
            .client
            .purchase_brief::<OrderRef>(&self.sale, &purchase)
            .await?;
        match (answer.status, answer.outcome) {
            (status @ (StatusCode::CREATED | StatusCode::ACCEPTED), Ok(order)) => {
                self.count(status.as_u16().to_string());
                if status == StatusCode::CREATED {
                    self.acknowledged
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(order.order_id);
                }
                Ok(Answer::Purchased)
            }
            (status, outcome) => Ok(self.refused(status, outcome.err())),
        }
    }

    /// Counts an answer that is not a purchase, under its error code.
    fn refused(&self, status: StatusCode, code: Option<ErrorCode>) -> Answer {
        let label = code.map_or("unexpected answer", ErrorCode::as_str);
        self.count(format!("{} {label}", status.as_u16()));
        match code {
            Some(ErrorCode::SoldOut | ErrorCode::InsufficientStock) => Answer::SoldOut,
            Some(ErrorCode::LimitExceeded) => Answer::AlreadyPurchased,
            _ => Answer::Failed(format!("HTTP {status} {label}")),
        }
    }

    pub(crate) async fn sale_remaining(&self) -> Result<i64, ClientError> {
        let sale = self.client.sale(&self.sale).await?;
        Ok(i64::from(sale.remaining))
    }

    pub(crate) async fn orders(&self) -> Result<Vec<OrderBody>, ClientError> {
        self.client.all_orders(&self.sale).await
    }
}

#[async_trait]
impl Purchaser for HttpSale {
    async fn purchase(&self, buyer: &str) -> Answer {
        match self.decide(buyer).await {
            Ok(answer) => answer,
            Err(error) => match error.status() {
                Some(status) => {
                    self.count(format!("{} unreadable body", status.as_u16()));
                    Answer::Failed(error.to_string())
                }
                None => {
                    self.count("no answer".to_owned());
                    Answer::Failed(error.to_string())
                }
            },
        }
    }
}

impl HttpSale {
    /// Stock left and live orders, from the service.
    pub(crate) async fn verify(&self) -> Result<Verification, StrategyError> {
        let http = |e: ClientError| StrategyError::Other(format!("HTTP: {e}"));
        let remaining = self.sale_remaining().await.map_err(http)?;
        let orders = self.orders().await.map_err(http)?;
        let live: u64 = orders
            .iter()
            .filter(|o| matches!(o.status, OrderStatus::Confirmed | OrderStatus::Held))
            .map(|o| u64::from(o.quantity))
            .sum();
        Ok(Verification {
            remaining,
            recorded_orders: Some(live),
            lowest_stock_seen: None,
        })
    }
}

/// Creates a sale on the service at `config.url`, sends the crowd, and
/// checks the result. `on_answer` is called once per answer.
pub async fn run(
    config: &LoadConfig,
    on_answer: Arc<dyn Fn() + Send + Sync>,
) -> Result<LoadReport, LoadError> {
    let workload = &config.workload;
    let client = client(&config.url, &config.admin_token, workload.concurrency)
        .map_err(|e| LoadError::Setup(format!("--url: {e}")))?;
    let sale = format!("load-{}", uuid::Uuid::now_v7().simple());
    create_sale(
        &client,
        &sale,
        workload.stock,
        workload.skus,
        config.hold_seconds,
    )
    .await?;
    let service = Arc::new(HttpSale::new(client, sale, Success::Order).with_skus(workload.skus));
    let tally = driver::drive(Arc::clone(&service), workload, on_answer).await;

    // Orders answered 202 may still be committing: give them a moment.
    let started = Instant::now();
    let verification = loop {
        let verification = service.verify().await;
        let settled = matches!(&verification, Ok(v) if v.recorded_orders >= Some(tally.purchased));
        if settled || started.elapsed() > SETTLE_TIMEOUT {
            break verification;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let observed = Observed::new(
        workload.stock,
        &tally,
        verification.map_err(|e| e.to_string()),
    );
    let mut result = BenchResult::new("http", workload, &tally, &observed, ServerWork::default());
    let extra = store_problems(&service).await;
    if !extra.is_empty() {
        result.problems.extend(extra);
        result.ok = false;
    }
    let statuses = service.statuses();
    Ok(LoadReport {
        result,
        statuses,
        sale: service.sale.clone(),
    })
}

/// A keep-alive HTTP/1.1 client of the service at `url` for `connections`
/// requests in flight, with the admin token.
pub(crate) fn client(
    url: &str,
    admin_token: &str,
    connections: usize,
) -> Result<Client, ClientError> {
    client_builder(url, connections)
        .admin_token(admin_token)
        .build()
}

/// The settings of [`client`], without a token.
pub(crate) fn client_builder(url: &str, connections: usize) -> ClientBuilder {
    Client::builder(url)
        .pool_max_idle_per_host(connections)
        .tcp_nodelay(true)
        .timeout(REQUEST_TIMEOUT)
}

/// What the order list says beyond the counts: acknowledged orders that
/// are not committed, buyers with two live orders.
pub(crate) async fn store_problems(service: &HttpSale) -> Vec<String> {
    let orders = match service.orders().await {
        Ok(orders) => orders,
        Err(error) => return vec![format!("could not list the sale's orders: {error}")],
    };
    let mut problems = Vec::new();
    let committed: HashSet<&str> = orders.iter().map(|o| o.order_id.as_str()).collect();
    let acknowledged = service
        .acknowledged
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let lost = acknowledged
        .iter()
        .filter(|id| !committed.contains(id.as_str()))
        .count();
    if lost > 0 {
        problems.push(format!(
            "{lost} orders were acknowledged with 201 but are not in the store"
        ));
    }
    let mut buyers = HashSet::new();
    let twice = orders
        .iter()
        .filter(|o| matches!(o.status, OrderStatus::Confirmed | OrderStatus::Held))
        .filter(|o| !buyers.insert(o.user_id.as_str()))
        .count();
    if twice > 0 {
        problems.push(format!(
            "the store holds a second live order for {twice} buyers"
        ));
    }
    problems
}

pub(crate) async fn create_sale(
    client: &Client,
    sale: &str,
    stock: u32,
    skus: u32,
    hold_seconds: Option<u64>,
) -> Result<(), LoadError> {
    let mut body = CreateSale::new(sale, stock);
    if skus > 1 {
        body.stock = None;
        body.skus = Some(
            skus::specs(stock, skus)
                .into_iter()
                .map(|sku| SkuStock {
                    id: sku.id.to_string(),
                    stock: sku.stock,
                })
                .collect(),
        );
    }
    body.hold_seconds = hold_seconds;
    match client.create_sale(&body).await {
        Ok(_) => Ok(()),
        Err(error) if error.is_transport() => Err(LoadError::Service(format!(
            "cannot reach {}: {error}",
            client.base_url()
        ))),
        Err(error) => {
            let hint = if error.status() == Some(StatusCode::UNAUTHORIZED) {
                " (pass the service's admin token with --admin-token or STOCKADE_ADMIN_TOKEN)"
            } else {
                ""
            };
            Err(LoadError::Service(format!(
                "creating the sale failed{hint}: {error}"
            )))
        }
    }
}
