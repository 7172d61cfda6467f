//! Issue 18, item 6: the cost of a miss. `GET /v1/orders/{id}` of an id
//! nobody knows costs at most one indexed store read: no outbox scan
//! (XRANGE, HMGET) of any sale, whatever the number of open sales. Real
//! Redis and PostgreSQL, the work counted by Redis's `INFO commandstats`
//! and `pg_stat_statements`.

use crate::instances;

use std::time::Instant;

use instances::{Backends, Instance};
use serde_json::json;
use stockade_core::OrderId;

/// The store's reads of one order by id (committed or void).
const ORDER_BY_ID: &str = "%FROM orders WHERE id = $1%";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unknown_order_id_costs_one_indexed_store_read_and_no_outbox_scan() {
    let backends = Backends::start(true).await;
    let server = Instance::start(&backends, |_| {}).await;
    let sales = ["open-a", "open-b", "open-c"];
    for sale in sales {
        let (status, body) = server.create_sale(json!({"id": sale, "stock": 100})).await;
        assert_eq!(status, 201, "{body}");
        let (status, body) = server.buy(sale, "early", None).await;
        assert_eq!(status, 201, "{body}");
    }

    const LOOKUPS: i64 = 100;
    let scans_before = backends.redis_calls("xrange") + backends.redis_calls("hmget");
    let reads_before = backends.statements_like(ORDER_BY_ID).await;
    let started = Instant::now();
    for _ in 0..LOOKUPS {
        let id = OrderId::generate();
        let (status, body) = server.get(&format!("/v1/orders/{id}")).await;
        assert_eq!(
            (status, &body["error"]["code"]),
            (404, &json!("unknown_order")),
            "{body}"
        );
    }
    let ticks = started.elapsed().as_secs() + 2;
    let scans = backends.redis_calls("xrange") + backends.redis_calls("hmget") - scans_before;
    let reads = backends.statements_like(ORDER_BY_ID).await - reads_before;
    eprintln!("{LOOKUPS} misses: {scans} outbox reads in Redis, {reads} order reads in the store");
    // The reconciler reads each open sale's outbox and snapshot once a
    // second; the lookups add nothing.
    let background = 2 * sales.len() as u64 * ticks;
    assert!(
        scans <= background,
        "{scans} XRANGE/HMGET for {LOOKUPS} misses (the reconciler alone: at most {background})"
    );
    assert_eq!(reads, LOOKUPS, "one indexed store read per miss");
}
