//! The entry page of a draw sale in headless Chromium: four buyers enter
//! through it, the draw is made when entries close (on a manual clock),
//! and each page shows its buyer's result; the winners' pages show the
//! orders the store holds.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use common::{Setup, TestServer, Timing};
use fantoccini::{Client, Locator};
use serde_json::json;
use stockade_core::{Clock, ManualClock};
use stockade_test_support::browser::Chromedriver;

/// The entry's result the page shows, once it is not `entered`.
async fn decided(browser: &Client) -> Option<(String, String)> {
    let entry = browser.find(Locator::Id("entry")).await.ok()?;
    let result = entry.attr("data-result").await.ok()??;
    if result == "entered" {
        return None;
    }
    let order = browser.find(Locator::Id("order")).await.ok()?;
    Some((result, order.text().await.ok()?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn buyers_enter_through_the_page_and_see_their_result() {
    let clock = ManualClock::new(Utc::now());
    let server =
        TestServer::start_with_clock(Setup::Embedded, Timing::default(), Arc::new(clock.clone()))
            .await;
    let opened = clock.now();
    let (status, body) = server
        .create_sale(json!({
            "id": "raffle", "stock": 2, "allocation": "draw",
            "entries_open_at": opened - TimeDelta::seconds(1),
            "entries_close_at": opened + TimeDelta::seconds(30),
        }))
        .await;
    assert_eq!(status, 201, "{body}");

    let driver = Chromedriver::start().unwrap();
    let mut browsers = Vec::new();
    for i in 0..4 {
        let browser = driver.session().await.unwrap();
        browser.goto(&server.at("/draw/raffle")).await.unwrap();
        browser
            .find(Locator::Css("label[for=user-id] + input#user-id"))
            .await
            .unwrap()
            .send_keys(&format!("page-buyer-{i}"))
            .await
            .unwrap();
        browser
            .find(Locator::Id("enter"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        browsers.push(browser);
    }
    // Every page says its buyer is in the draw.
    for browser in &browsers {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = browser.find(Locator::Id("status")).await.unwrap();
            if status
                .text()
                .await
                .unwrap()
                .starts_with("You are in the draw")
            {
                break;
            }
            assert!(Instant::now() < deadline, "a page never showed its entry");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let (_, draw) = server.get("/v1/sales/raffle/draw").await;
    assert_eq!(draw["entry_count"], 4, "{draw}");

    // Entries close; the pages learn their results.
    clock.set(opened + TimeDelta::seconds(30));
    // The store's clock closes entries.
    let store = server.state().store();
    store.shift_clock(clock.now() - store.draw_clock().await.unwrap());
    let mut results = vec![None; browsers.len()];
    let deadline = Instant::now() + Duration::from_secs(30);
    while results.iter().any(Option::is_none) {
        assert!(
            Instant::now() < deadline,
            "pages still waiting: {results:?}"
        );
        for (browser, seen) in browsers.iter().zip(results.iter_mut()) {
            if seen.is_none() {
                *seen = decided(browser).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let shot = driver
        .save_screenshot(&browsers[0], "draw-page.png")
        .await
        .unwrap();
    assert!(std::fs::metadata(&shot).unwrap().len() > 0);
    let results: Vec<(String, String)> = results.into_iter().map(Option::unwrap).collect();
    let mut shown: Vec<String> = results
        .iter()
        .filter(|(result, _)| result == "won")
        .map(|(_, order)| order.clone())
        .collect();
    assert_eq!(shown.len(), 2, "{results:?}");
    // No sale without holds leaves a waiting list to roll down to: the
    // draw settles at once and the others lost.
    assert_eq!(
        results
            .iter()
            .filter(|(r, _)| r == "lost" || r == "waitlisted")
            .count(),
        2,
        "{results:?}"
    );
    let mut committed: Vec<String> = server
        .all_orders("raffle")
        .await
        .iter()
        .map(|o| o["order_id"].as_str().unwrap().to_owned())
        .collect();
    shown.sort();
    committed.sort();
    assert_eq!(shown, committed);
    for browser in browsers {
        browser.close().await.unwrap();
    }
}
