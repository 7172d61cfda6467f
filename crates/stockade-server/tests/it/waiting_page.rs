//! The waiting page in headless Chromium (issue 11, item 4): five buyers
//! open `/queue/{sale}` for a sale of three items, join, wait, and press
//! Buy when admitted. Exactly three see their order and two see sold out.
//! A screenshot of each buyer's page is written under target/screenshots/.

use crate::common;

use std::time::{Duration, Instant};

use common::{Setup, TestServer};
use fantoccini::{Client, Locator};
use serde_json::json;
use stockade_test_support::browser::Chromedriver;

/// What a buyer's page shows at the end: `data-outcome` and the text.
async fn outcome(browser: &Client) -> Option<(String, String)> {
    let result = browser.find(Locator::Id("result")).await.unwrap();
    if !result.is_displayed().await.unwrap() {
        return None;
    }
    let outcome = result
        .attr("data-outcome")
        .await
        .unwrap()
        .unwrap_or_default();
    Some((outcome, result.text().await.unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_browser_buyers_for_three_items_three_orders_two_sold_out() {
    let server = TestServer::start(Setup::Embedded).await;
    let (status, body) = server
        .create_sale(json!({ "id": "launch", "stock": 3,
            "waiting_room": { "admit_per_second": 5, "admission_ttl_seconds": 120 } }))
        .await;
    assert_eq!(status, 201, "{body}");

    let driver = Chromedriver::start().unwrap();
    let mut browsers = Vec::new();
    for i in 0..5 {
        let browser = driver.session().await.unwrap();
        browser.goto(&server.at("/queue/launch")).await.unwrap();
        let field = browser
            .find(Locator::Css("label[for=user-id] + input#user-id"))
            .await
            .unwrap();
        field
            .send_keys(&format!("browser-buyer-{i}"))
            .await
            .unwrap();
        browser
            .find(Locator::Id("join"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        browsers.push(browser);
    }

    // Each buyer presses Buy as soon as the page offers it.
    let mut outcomes = vec![None; browsers.len()];
    let deadline = Instant::now() + Duration::from_secs(90);
    while outcomes.iter().any(Option::is_none) {
        assert!(
            Instant::now() < deadline,
            "pages still waiting: {outcomes:?}"
        );
        for (browser, seen) in browsers.iter().zip(outcomes.iter_mut()) {
            if seen.is_some() {
                continue;
            }
            if let Some(result) = outcome(browser).await {
                *seen = Some(result);
                continue;
            }
            let buy = browser.find(Locator::Id("buy")).await.unwrap();
            if buy.is_displayed().await.unwrap() && buy.is_enabled().await.unwrap() {
                buy.click().await.unwrap();
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    for (i, browser) in browsers.iter().enumerate() {
        let path = driver
            .save_screenshot(browser, &format!("waiting-room-buyer-{i}.png"))
            .await
            .unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > 0);
    }
    let outcomes: Vec<(String, String)> = outcomes.into_iter().map(Option::unwrap).collect();
    let orders: Vec<_> = outcomes.iter().filter(|(o, _)| o == "order").collect();
    let sold_out: Vec<_> = outcomes.iter().filter(|(o, _)| o == "sold_out").collect();
    assert_eq!(orders.len(), 3, "{outcomes:?}");
    assert_eq!(sold_out.len(), 2, "{outcomes:?}");
    // The order ids the pages show are the committed orders.
    let mut shown: Vec<String> = orders
        .iter()
        .map(|(_, text)| text.strip_prefix("Your order: ").unwrap().to_owned())
        .collect();
    let mut committed: Vec<String> = server
        .all_orders("launch")
        .await
        .iter()
        .map(|o| o["order_id"].as_str().unwrap().to_owned())
        .collect();
    shown.sort();
    committed.sort();
    assert_eq!(shown, committed);
    for (_, text) in &sold_out {
        assert_eq!(text, "Sold out.");
    }
    for browser in browsers {
        browser.close().await.unwrap();
    }
}
