//! The queue routes refuse bad input and change nothing.

use serde_json::json;

use crate::common;
use crate::waiting_room_http::front::{Front, code};

pub(crate) async fn queue_routes_refuse_bad_input_and_change_nothing(front: Front) {
    let room =
        json!({ "admit_per_second": 5, "admission_ttl_seconds": 30, "admission_factor": 2.0 });
    for (bad, field) in [
        (
            json!({ "admit_per_second": 0, "admission_ttl_seconds": 30 }),
            "admit_per_second",
        ),
        (
            json!({ "admit_per_second": 100001, "admission_ttl_seconds": 30 }),
            "admit_per_second",
        ),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 0 }),
            "admission_ttl_seconds",
        ),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 3601 }),
            "admission_ttl_seconds",
        ),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 30, "admission_factor": 0.5 }),
            "admission_factor",
        ),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 30, "admission_factor": 11 }),
            "admission_factor",
        ),
        (json!({ "admit_per_second": 5 }), "admission_ttl_seconds"),
        (
            json!({ "admit_per_second": 5, "admission_ttl_seconds": 30, "colour": 1 }),
            "colour",
        ),
    ] {
        let (status, body) = front
            .create_sale(json!({ "id": "bad-room", "stock": 10, "waiting_room": bad }))
            .await;
        assert_eq!(status, 422, "{bad}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(field),
            "{bad}: {body}"
        );
    }
    let (status, _) = front.get(0, "/v1/sales/bad-room").await;
    assert_eq!(status, 404, "a refused sale is not created");

    let (status, created) = front
        .create_sale(json!({ "id": "q", "stock": 10, "waiting_room": room }))
        .await;
    assert_eq!(status, 201, "{created}");
    let (status, _) = front
        .create_sale(json!({ "id": "q", "stock": 10, "waiting_room": room }))
        .await;
    assert_eq!(status, 200, "the identical sale again");
    for other in [
        json!({ "id": "q", "stock": 10 }),
        json!({ "id": "q", "stock": 10, "waiting_room": { "admit_per_second": 6, "admission_ttl_seconds": 30, "admission_factor": 2.0 } }),
    ] {
        let (status, body) = front.create_sale(other).await;
        assert_eq!((status, code(&body)), (409, "sale_conflict"), "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("waiting room"),
            "{body}"
        );
    }
    let (status, _) = front
        .create_sale(json!({ "id": "no-room", "stock": 10 }))
        .await;
    assert_eq!(status, 201);

    for (sale, body, status, expected) in [
        ("q", json!({}), 422, "user_id"),
        ("q", json!({ "user_id": "" }), 422, "user_id"),
        ("q", json!({ "user_id": "u", "extra": 1 }), 422, "extra"),
        ("no-room", json!({ "user_id": "u" }), 409, "no_waiting_room"),
        ("nope", json!({ "user_id": "u" }), 404, "unknown_sale"),
        ("bad id!", json!({ "user_id": "u" }), 422, "sale_id"),
    ] {
        let request = front
            .client
            .post(front.at(0, &format!("/v1/sales/{}/queue", sale.replace(' ', "%20"))))
            .json(&body);
        let (got, answer) = common::split(request.send().await.unwrap()).await;
        assert_eq!(got, status, "{sale} {body}: {answer}");
        assert!(
            answer.to_string().contains(expected),
            "{sale} {body}: {answer}"
        );
    }
    let request = front
        .client
        .post(front.at(0, "/v1/sales/q/queue"))
        .body("user_id=u");
    let (status, _) = common::split(request.send().await.unwrap()).await;
    assert_eq!(status, 415);

    for (ticket, status, expected) in [
        ("nonsense", 422, "ticket"),
        ("q.0123", 422, "ticket"),
        // The form of the tickets before they carried their place.
        ("q.0123456789abcdef0123456789abcdef", 422, "ticket"),
        // Well formed, but not minted by this service (a forged place or
        // buyer): unknown, and never put in the queue.
        (
            "q.0000000000000001.Zmlyc3Q.0123456789abcdef0123456789abcdef",
            404,
            "unknown_ticket",
        ),
        (
            "nope.0000000000000001.Zmlyc3Q.0123456789abcdef0123456789abcdef",
            404,
            "unknown_ticket",
        ),
        // Well formed, with a buyer part that is not even UTF-8.
        (
            "q.0000000000000001.000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000.0123456789abcdef0123456789abcdef",
            404,
            "unknown_ticket",
        ),
    ] {
        let (got, answer) = front.poll(1, ticket).await;
        assert_eq!(got, status, "{ticket}: {answer}");
        assert!(answer.to_string().contains(expected), "{ticket}: {answer}");
    }
    // Nothing above joined anyone: the first buyer is first.
    let (status, joined) = front.join(1, "q", "first").await;
    assert_eq!(status, 201);
    assert_eq!(joined["position"], 1, "{joined}");
    assert!(joined["estimated_wait_seconds"].is_u64(), "{joined}");

    // The page.
    let response = front
        .client
        .get(front.at(0, "/queue/q"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let page = response.text().await.unwrap();
    assert!(page.contains(r#"data-sale="q""#) && page.contains(r#"<label for="user-id">"#));
    let (status, _) = front.get(0, "/queue/bad%20id").await;
    assert_eq!(status, 422);
    for asset in ["/assets/queue.js", "/assets/queue.css"] {
        let response = front.client.get(front.at(1, asset)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{asset}");
    }

    // The OpenAPI document describes the routes and the header.
    let (status, doc) = front.get(0, "/openapi.json").await;
    assert_eq!(status, 200);
    let paths = &doc["paths"];
    for (path, method, statuses) in [
        (
            "/v1/sales/{id}/queue",
            "post",
            &["200", "201", "404", "409", "422", "503"][..],
        ),
        (
            "/v1/queue/{ticket}",
            "get",
            &["200", "404", "422", "503"][..],
        ),
        ("/queue/{id}", "get", &["200", "422"][..]),
        ("/v1/sales/{id}/purchases", "post", &["403"][..]),
    ] {
        let responses = &paths[path][method]["responses"];
        for status in statuses {
            assert!(
                responses[status].is_object(),
                "{method} {path} lacks {status}: {responses}"
            );
        }
    }
    let parameters = paths["/v1/sales/{id}/purchases"]["post"]["parameters"]
        .as_array()
        .unwrap();
    assert!(
        parameters
            .iter()
            .any(|p| p["name"] == "Admission-Token" && p["in"] == "header"),
        "{parameters:?}"
    );
    let schemas = &doc["components"]["schemas"];
    assert!(
        schemas["CreateSale"]["properties"]["waiting_room"].is_object(),
        "{}",
        schemas["CreateSale"]
    );
    assert!(schemas["QueueTicket"]["properties"]["admission_token"].is_object());
}
