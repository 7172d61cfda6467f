//! An order's `created_at` has one precision everywhere (issue 12, item 7):
//! the 201 of the purchase, a later GET, the replay of the same
//! idempotency key and the sale's order list show the same instant, to the
//! millisecond every store keeps, on every engine.

use crate::common;

use common::{Setup, TestServer};
use serde_json::{Value, json};

fn created_at(body: &Value) -> String {
    body["created_at"]
        .as_str()
        .unwrap_or_else(|| panic!("no created_at in {body}"))
        .to_owned()
}

async fn one_instant_everywhere(setup: Setup) {
    let server = TestServer::start(setup).await;
    let (status, body) = server
        .create_sale(json!({"id": "times", "stock": 10}))
        .await;
    assert_eq!(status, 201, "{body}");
    for buyer in 0..3 {
        let key = format!("key-{buyer}");
        let user = format!("buyer-{buyer}");
        let (status, bought) = server.buy("times", &user, 1, Some(&key)).await;
        assert_eq!(status, 201, "{setup:?}: {bought}");
        let answered = created_at(&bought);
        let order_id = bought["order_id"].as_str().unwrap();

        let parsed = chrono::DateTime::parse_from_rfc3339(&answered).unwrap();
        assert_eq!(
            parsed.timestamp_subsec_nanos() % 1_000_000,
            0,
            "{setup:?}: more precise than the store keeps: {answered}"
        );
        let (status, read) = server.get(&format!("/v1/orders/{order_id}")).await;
        assert_eq!(status, 200, "{read}");
        assert_eq!(created_at(&read), answered, "{setup:?}: GET");
        let (status, replayed) = server.buy("times", &user, 1, Some(&key)).await;
        assert!(
            status == 200 || status == 201,
            "{setup:?}: {status} {replayed}"
        );
        assert_eq!(replayed["order_id"], bought["order_id"], "{setup:?}");
        assert_eq!(created_at(&replayed), answered, "{setup:?}: replay");
    }
    let orders = server.all_orders("times").await;
    assert_eq!(orders.len(), 3);
    for order in &orders {
        let parsed = chrono::DateTime::parse_from_rfc3339(&created_at(order)).unwrap();
        assert_eq!(parsed.timestamp_subsec_nanos() % 1_000_000, 0, "{order}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_at_is_the_same_millisecond_in_the_answer_a_read_and_a_replay() {
    for setup in [Setup::Embedded, Setup::RedisPostgres, Setup::Postgres] {
        one_instant_everywhere(setup).await;
    }
}
