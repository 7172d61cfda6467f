//! A sale created with a waiting room sells at once: listing its room wakes
//! the room tickers (on every instance), and a ticker that reads the sale
//! before the engine holds it must not take it for a sale the engine lost.
//! A rebuild there would answer the sale's first buyers 503 `rebuilding`.

use serde_json::json;

use crate::waiting_room_http::front::{Front, code};

/// Sales created, [`AT_ONCE`] at a time: the race between a ticker's read
/// and the engine's create is a few round trips wide, so one creation
/// rarely loses it; creations side by side keep the tickers busy.
const SALES: usize = 60;
const AT_ONCE: usize = 30;

pub(crate) async fn a_new_sale_with_a_room_sells_without_a_rebuild(front: Front) {
    let front = &front;
    for batch in 0..SALES / AT_ONCE {
        let creations = (0..AT_ONCE).map(|n| async move {
            let id = format!("fresh-{batch}-{n}");
            let room = json!({ "admit_per_second": 50, "admission_ttl_seconds": 30 });
            let (status, sale) = front
                .create_sale(json!({ "id": id, "stock": 5, "waiting_room": room }))
                .await;
            assert_eq!(status, 201, "{sale}");
            // At once, on both instances: the door answers, not a rebuild.
            for instance in 0..2 {
                let (status, body) = front.buy(instance, &id, "alice", None).await;
                assert_eq!(
                    (status, code(&body)),
                    (403, "admission_required"),
                    "sale {id}, instance {instance}: {body}"
                );
            }
        });
        futures::future::join_all(creations).await;
    }
    for instance in 0..2 {
        let (status, text) = front.get(instance, "/metrics").await;
        assert_eq!(status, 200);
        let rebuilds = crate::common::metric_sum(text.as_str().unwrap(), "stockade_rebuilds_total");
        assert_eq!(rebuilds, 0.0, "instance {instance} rebuilt new sales");
    }
}
