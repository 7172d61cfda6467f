//! `stockade bench draw`: how long a large draw takes from the close of
//! its entries to its publication, on a running `stockade serve`.
//!
//! Each run creates a draw sale over HTTP, loads its entries straight into
//! the service's order store in one transaction
//! ([`OrderStore::enter_draw_many`]: entering 100,000 buyers over HTTP
//! would take longer than the draw and is not what is measured), waits for
//! the close, and reads the draw's record in the store until it is drawn:
//! close → published is the draw's instant less its close, both on the
//! store's clock. The published draw is then checked over HTTP: every
//! entry in it, the seed out, and the sale sold exactly what the winners
//! hold.

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use serde::Serialize;
use stockade_api::{Allocation, CreateSale};
use stockade_core::{Item, SaleId, SkuId, UserId};
use stockade_store::OrderStore;
use stockade_store::draws::{EnteredMany, NewEntry};

use crate::http_load::{self, LoadError};

/// What to measure.
#[derive(Debug, Clone)]
pub struct DrawBenchConfig {
    /// The service.
    pub url: String,
    /// Its admin token (creates the sales).
    pub admin_token: String,
    /// Its order store's URL (the entries are loaded there).
    pub store_url: String,
    /// Entries per draw.
    pub entries: usize,
    /// Items on sale (one SKU; each entry asks for one).
    pub stock: u32,
}

/// One run's figures.
#[derive(Debug, Clone, Serialize)]
pub struct DrawRun {
    /// The sale.
    pub sale: String,
    /// Entries in the draw.
    pub entries: u64,
    /// Entries that won an order (the sale's sold count).
    pub won: u32,
    /// Seconds to load the entries (not part of the measure).
    pub load_seconds: f64,
    /// Seconds from the close of entries to the published draw, on the
    /// store's clock.
    pub close_to_published_seconds: f64,
}

/// How long a draw may take before the run gives up.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs one draw of `config.entries` entries as sale `sale`; `progress`
/// gets a line per step.
pub async fn run_once(
    config: &DrawBenchConfig,
    sale: &str,
    progress: &(dyn Fn(String) + Sync),
) -> Result<DrawRun, LoadError> {
    let client = http_load::client(&config.url, &config.admin_token, 4)
        .map_err(|e| LoadError::Setup(format!("--url: {e}")))?;
    let store = OrderStore::open(&config.store_url)
        .await
        .map_err(|e| LoadError::Setup(format!("opening the service's order store: {e}")))?;
    // Room to load the entries (about 6 s for 100,000 on a shared 2-core
    // machine), with slack for a loaded one.
    let window = TimeDelta::seconds(3 + (config.entries / 8_000) as i64);
    let opens = Utc::now() - TimeDelta::seconds(1);
    let closes = Utc::now() + window;
    let mut create = CreateSale::new(sale, config.stock);
    create.allocation = Some(Allocation::Draw);
    create.entries_open_at = Some(opens);
    create.entries_close_at = Some(closes);
    client
        .create_sale(&create)
        .await
        .map_err(|e| LoadError::Service(format!("creating draw sale {sale} failed: {e}")))?;
    let id = SaleId::new(sale).map_err(|e| LoadError::Setup(e.to_string()))?;
    let sku =
        SkuId::new(stockade_core::sku::DEFAULT_SKU).map_err(|e| LoadError::Setup(e.to_string()))?;
    let entries = (0..config.entries)
        .map(|b| {
            Ok(NewEntry {
                user_id: UserId::new(format!("buyer-{b}"))?,
                items: vec![Item {
                    sku: sku.clone(),
                    quantity: 1,
                }],
                tier: None,
            })
        })
        .collect::<Result<Vec<_>, stockade_core::ValidationError>>()
        .map_err(|e| LoadError::Setup(e.to_string()))?;
    let loading = Instant::now();
    let loaded = store
        .enter_draw_many(&id, &entries)
        .await
        .map_err(|e| LoadError::Service(format!("loading the entries failed: {e}")))?;
    let load_seconds = loading.elapsed().as_secs_f64();
    let EnteredMany::New(entered) = loaded else {
        return Err(LoadError::Service(format!(
            "the store refused the entries: {loaded:?} (a loaded machine: the window closed first)"
        )));
    };
    progress(format!(
        "{sale}: {entered} entries loaded in {load_seconds:.2} s; entries close at {closes}"
    ));
    let deadline = Instant::now() + (closes - Utc::now()).to_std().unwrap_or_default();
    let published = loop {
        let record = store
            .draw(&id)
            .await
            .map_err(|e| LoadError::Service(format!("reading the draw failed: {e}")))?
            .ok_or_else(|| LoadError::Service(format!("{sale} is not a draw sale")))?;
        if let Some(drawn) = record.drawn_at {
            break (drawn - record.config.close_at).as_seconds_f64();
        }
        if Instant::now() > deadline + PUBLISH_TIMEOUT {
            return Err(LoadError::Service(format!(
                "{sale} was not drawn within {} s of its close",
                PUBLISH_TIMEOUT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    progress(format!(
        "{sale}: published {published:.2} s after the close"
    ));
    let run = DrawRun {
        sale: sale.to_owned(),
        entries: entered,
        won: check(&client, sale, entered, config.stock).await?,
        load_seconds,
        close_to_published_seconds: published,
    };
    store.close().await;
    Ok(run)
}

/// Checks the published draw: every entry in it and the seed out, and the
/// sale sold `min(stock, entries)` (one item each). Answers the winners.
async fn check(
    client: &stockade_client::Client,
    sale: &str,
    entered: u64,
    stock: u32,
) -> Result<u32, LoadError> {
    let draw = client
        .draw(sale)
        .await
        .map_err(|e| LoadError::Service(format!("reading the published draw failed: {e}")))?;
    let view = client
        .sale(sale)
        .await
        .map_err(|e| LoadError::Service(format!("reading the sale failed: {e}")))?;
    let expected = u64::from(stock).min(entered);
    let mut problems = Vec::new();
    if draw.seed.is_none() {
        problems.push("no seed published".to_owned());
    }
    if draw.order.len() as u64 != entered {
        problems.push(format!(
            "{} entries published of {entered}",
            draw.order.len()
        ));
    }
    if u64::from(view.sold) != expected {
        problems.push(format!("{} sold, {expected} expected", view.sold));
    }
    if problems.is_empty() {
        Ok(view.sold)
    } else {
        Err(LoadError::Service(format!(
            "the draw of {sale} does not add up: {}",
            problems.join("; ")
        )))
    }
}
