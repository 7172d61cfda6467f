//! Issue 18, item 6: what a Redis engine remembers of outbox entries is
//! bounded by its own entries. Reading the outbox (another instance's
//! recovery, a reconciler pass) never leaves other instances' entries
//! behind once those instances have acknowledged and deleted them.

use std::sync::Arc;

use stockade_core::{Engine, OrderId, Purchase, PurchaseOutcome, SaleId, SaleSpec, SystemClock};
use stockade_engine::{RedisEngine, RedisEngineConfig};
use stockade_test_support::RedisServer;

async fn engine(server: &RedisServer) -> RedisEngine {
    RedisEngine::connect(&RedisEngineConfig::new(server.url()), Arc::new(SystemClock))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_other_instances_entries_leaves_nothing_behind_once_they_are_gone() {
    let server = RedisServer::start().unwrap();
    let writer = engine(&server).await;
    let reader = engine(&server).await;
    let sale = SaleId::new("busy").unwrap();
    let spec = SaleSpec::builder("busy", 100_000)
        .unwrap()
        .per_user_limit(1)
        .unwrap()
        .build()
        .unwrap();
    writer.create_sale(&spec).await.unwrap();
    for round in 0..20 {
        // The writer sells (one entry per purchase here: one at a time)...
        let mut sold = Vec::new();
        for buyer in 0..10 {
            let purchase = Purchase::new("busy", format!("r{round}-b{buyer}"), 1).unwrap();
            match writer.purchase(&purchase).await.unwrap() {
                PurchaseOutcome::Purchased { order_id, .. } => sold.push(order_id),
                other => panic!("{other:?}"),
            }
        }
        // ...the reader's reconciler reads the outbox meanwhile...
        let read = reader.outbox(&sale).await.unwrap();
        assert_eq!(read.len(), 10, "round {round}");
        // ...and the writer commits and acknowledges its own orders.
        writer.acknowledge(&sale, &sold).await.unwrap();
        assert!(reader.outbox(&sale).await.unwrap().is_empty());
        assert_eq!(writer.outbox_entries_known(), 0, "round {round}");
        assert_eq!(
            reader.outbox_entries_known(),
            0,
            "round {round}: the reader still remembers entries that left the stream"
        );
    }
    // Acknowledging what it read still deletes another's entry.
    let purchase = Purchase::new("busy", "late", 1).unwrap();
    let PurchaseOutcome::Purchased { order_id, .. } = writer.purchase(&purchase).await.unwrap()
    else {
        panic!("not sold");
    };
    let read: Vec<OrderId> = reader
        .outbox(&sale)
        .await
        .unwrap()
        .iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(read, vec![order_id]);
    reader.acknowledge(&sale, &read).await.unwrap();
    assert_eq!(reader.outbox_entries_known(), 0);
    assert!(writer.outbox(&sale).await.unwrap().is_empty());
}
