//! Admissions: the rate however many tickers, never more outstanding than
//! the stock allows, an unused admission expiring.

use stockade_server::waiting_room::{CloseReason, QueueBackend, TicketState};

use super::helpers::{T0, join, room, sale, state, tick};

pub async fn admissions_follow_the_rate_however_many_tickers(backend: &dyn QueueBackend) {
    let config = room(10, 600);
    for (name, tickers) in [("rate-one", 1), ("rate-three", 3)] {
        let drop = sale(name);
        for i in 0..200 {
            join(backend, &drop, i, T0).await;
        }
        let mut admitted = 0;
        // Ten seconds in 100 ms steps; with several tickers each step is
        // ticked several times (instances tick independently).
        for step in 0..=100 {
            for offset in 0..tickers {
                let now = T0 + step * 100 + offset * 7;
                admitted += backend
                    .tick(&drop, &tick(now, 10_000, config))
                    .await
                    .unwrap()
                    .admitted
                    .len();
            }
        }
        // 10 per second for 10 s, plus the one admitted at once.
        let expected = 101.0;
        assert!(
            (admitted as f64 - expected).abs() <= expected * 0.2,
            "{tickers} tickers admitted {admitted}, expected about {expected}"
        );
        assert!((admitted as i64 - 101).abs() <= 1, "{admitted}");
    }
    // After a pause only a burst of half a second's worth goes in at once.
    let drop = sale("rate-burst");
    for i in 0..50 {
        join(backend, &drop, i, T0).await;
    }
    backend
        .tick(&drop, &tick(T0, 10_000, config))
        .await
        .unwrap();
    let report = backend
        .tick(&drop, &tick(T0 + 60_000, 10_000, config))
        .await
        .unwrap();
    assert_eq!(report.admitted.len(), 5);
}

pub async fn outstanding_admissions_never_exceed_the_stock_times_the_factor(
    backend: &dyn QueueBackend,
) {
    let drop = sale("stock-cap");
    let config = room(1_000, 60);
    let mut tickets = Vec::new();
    for i in 0..100 {
        tickets.push(join(backend, &drop, i, T0).await.0.ticket);
    }
    let mut admitted = Vec::new();
    for step in 0..10 {
        let report = backend
            .tick(&drop, &tick(T0 + step * 100, 10, config))
            .await
            .unwrap();
        assert!(report.outstanding <= 15, "{report:?}");
        admitted.extend(report.admitted);
    }
    assert_eq!(admitted, tickets[..15].to_vec(), "10 left x 1.5");
    // Five buy: their admissions are used, and five items are gone. A
    // ticker that read the stock (10) before they were used counts them
    // as still outstanding.
    let used_before = backend.used(&drop).await.unwrap();
    assert_eq!(used_before, 0);
    for ticket in &admitted[..5] {
        backend.consume(ticket).await.unwrap();
        backend.consume(ticket).await.unwrap();
    }
    assert_eq!(
        backend.used(&drop).await.unwrap(),
        5,
        "each admission is used once"
    );
    let mut stale = tick(T0 + 1_050, 10, config);
    stale.used_before = used_before;
    let report = backend.tick(&drop, &stale).await.unwrap();
    assert!(
        report.admitted.is_empty(),
        "a stale stock figure admitted {:?}",
        report.admitted
    );
    let report = backend
        .tick(&drop, &tick(T0 + 1_100, 5, config))
        .await
        .unwrap();
    assert_eq!(report.outstanding, 10);
    assert!(
        report.admitted.is_empty(),
        "5 left x 1.5 = 7 < 10 outstanding"
    );
    // Two cancels: 7 left, cap 10, still none.
    let report = backend
        .tick(&drop, &tick(T0 + 1_200, 7, config))
        .await
        .unwrap();
    assert!(report.admitted.is_empty());
    // Stock comes back: 10 left, cap 15, five more.
    let report = backend
        .tick(&drop, &tick(T0 + 1_300, 10, config))
        .await
        .unwrap();
    assert_eq!(report.admitted, tickets[15..20].to_vec());
    assert_eq!(report.outstanding, 15);
    // The admissions expire unused; during the grace they still count.
    let later = T0 + 1_300 + 60_000;
    let mut in_grace = tick(later + 4_000, 10, config);
    in_grace.expired_before_ms = T0;
    let report = backend.tick(&drop, &in_grace).await.unwrap();
    assert!(report.admitted.is_empty());
    assert_eq!(report.outstanding, 15);
    // Past it, the cap is free again.
    let report = backend
        .tick(&drop, &tick(later + 5_000, 10, config))
        .await
        .unwrap();
    assert_eq!(report.outstanding, report.admitted.len() as u64);
    assert_eq!(
        report.admitted,
        tickets[20..20 + report.admitted.len()].to_vec()
    );
    assert!(report.admitted.len() <= 15);
}

pub async fn an_unused_admission_expires_and_its_buyer_may_queue_again(backend: &dyn QueueBackend) {
    let drop = sale("expiry");
    let config = room(1_000, 5);
    let (view, _) = join(backend, &drop, 1, T0).await;
    backend.tick(&drop, &tick(T0, 10, config)).await.unwrap();
    assert_eq!(
        state(backend, &view.ticket, T0 + 4_999).await,
        TicketState::Admitted {
            until_ms: T0 + 5_000
        }
    );
    assert_eq!(
        state(backend, &view.ticket, T0 + 5_000).await,
        TicketState::Closed(CloseReason::AdmissionExpired)
    );
    let (again, created) = join(backend, &drop, 1, T0 + 6_000).await;
    assert!(created);
    assert_ne!(again.ticket, view.ticket);
    let report = backend
        .tick(&drop, &tick(T0 + 6_000, 10, config))
        .await
        .unwrap();
    assert_eq!(report.admitted, vec![again.ticket]);
    assert_eq!(
        report.outstanding, 1,
        "the expired admission no longer counts"
    );
}
