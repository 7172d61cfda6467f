//! What the draw tests share: an entry made over HTTP, and the clocks a
//! draw is judged by (the instance's and the store's) moved together.

use chrono::{DateTime, Utc};
use serde_json::Value;
use stockade_core::ManualClock;

use super::{TestServer, split};

impl TestServer {
    /// `POST /v1/sales/{sale}/entries` with `body`.
    pub async fn enter(&self, sale: &str, body: Value) -> (u16, Value) {
        let url = self.at(&format!("/v1/sales/{sale}/entries"));
        split(self.client.post(url).json(&body).send().await.unwrap()).await
    }

    /// Moves the store's clock alone (which closes entries and times
    /// leases) to `at`; the instance's stays.
    pub async fn move_store_to(&self, at: DateTime<Utc>) {
        let store = self.state().store();
        store.shift_clock(at - store.draw_clock().await.unwrap());
    }

    /// Moves the instance's clock (`clock`, the one it was started with)
    /// and the store's to `at`.
    pub async fn move_to(&self, clock: &ManualClock, at: DateTime<Utc>) {
        clock.set(at);
        self.move_store_to(at).await;
    }
}
