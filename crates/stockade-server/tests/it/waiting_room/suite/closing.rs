//! Closing and reopening: a sell-out, a zero the store does not confirm, an
//! ended sale, and the rooms listed to tick.

use stockade_server::waiting_room::{CloseReason, JoinOutcome, QueueBackend, Tick, TicketState};

use super::helpers::{T0, fresh, join, room, sale, state, tick};

pub async fn sold_out_closes_every_waiting_ticket_and_returned_stock_reopens(
    backend: &dyn QueueBackend,
) {
    let drop = sale("sell-out");
    let config = room(1_000, 60);
    let mut tickets = Vec::new();
    for i in 0..20 {
        tickets.push(join(backend, &drop, i, T0).await.0.ticket);
    }
    backend.tick(&drop, &tick(T0, 3, config)).await.unwrap();
    let report = backend
        .tick(&drop, &tick(T0 + 100, 3, config))
        .await
        .unwrap();
    assert_eq!(report.outstanding, 4);
    let report = backend
        .tick(&drop, &tick(T0 + 200, 0, config))
        .await
        .unwrap();
    assert_eq!(report.closed, Some(CloseReason::SoldOut));
    assert_eq!(report.waiting, 0);
    for ticket in &tickets[4..] {
        assert_eq!(
            state(backend, ticket, T0 + 300).await,
            TicketState::Closed(CloseReason::SoldOut)
        );
    }
    // Admitted buyers keep their admission: their purchase gets an answer.
    assert!(matches!(
        state(backend, &tickets[0], T0 + 300).await,
        TicketState::Admitted { .. }
    ));
    for who in [5, 500] {
        assert_eq!(
            backend
                .join(&fresh(&drop, who, T0 + 300, false), T0 + 300, false)
                .await
                .unwrap(),
            JoinOutcome::Closed(CloseReason::SoldOut)
        );
    }
    // Ticking again while sold out changes nothing.
    let report = backend
        .tick(&drop, &tick(T0 + 400, 0, config))
        .await
        .unwrap();
    assert_eq!(report.closed, Some(CloseReason::SoldOut));
    // A cancel brings one item back: the queue opens again.
    let report = backend
        .tick(&drop, &tick(T0 + 500, 1, config))
        .await
        .unwrap();
    assert_eq!(report.closed, None);
    let (fresh, created) = join(backend, &drop, 5, T0 + 600).await;
    assert!(created, "a buyer whose ticket closed queues again");
    assert_ne!(fresh.ticket, tickets[5]);
    assert_eq!(fresh.state, TicketState::Waiting { position: 1 });
    // The closed ticket the fresh one superseded is pruned (one record per
    // buyer); the other closed tickets stay closed.
    assert_eq!(
        backend.ticket(&tickets[5], T0 + 600, false).await.unwrap(),
        None,
        "a superseded ticket is pruned"
    );
    assert_eq!(
        state(backend, &tickets[6], T0 + 600).await,
        TicketState::Closed(CloseReason::SoldOut),
        "closed tickets stay closed"
    );
}

/// The engine reads 0 while it is rebuilt from the store (or after Redis
/// lost its data) although the store has stock left: the queue admits
/// nobody meanwhile, but every ticket keeps its place, and admissions go on
/// in order once the stock reads again.
pub async fn a_zero_stock_reading_the_store_does_not_confirm_keeps_every_place(
    backend: &dyn QueueBackend,
) {
    let drop = sale("rebuilt");
    let config = room(1_000, 60);
    let mut tickets = Vec::new();
    for i in 0..10 {
        tickets.push(join(backend, &drop, i, T0).await.0.ticket);
    }
    let rebuilding = Tick {
        sold_out: false,
        ..tick(T0 + 100, 0, config)
    };
    for at in [T0 + 100, T0 + 200, T0 + 300] {
        let report = backend
            .tick(
                &drop,
                &Tick {
                    now_ms: at,
                    expired_before_ms: at,
                    ..rebuilding
                },
            )
            .await
            .unwrap();
        assert_eq!(report.closed, None, "the queue must not close mid-rebuild");
        assert!(
            report.admitted.is_empty(),
            "nobody is admitted to a stock that reads 0"
        );
        assert_eq!(report.waiting, 10);
    }
    for (i, ticket) in tickets.iter().enumerate() {
        assert_eq!(
            state(backend, ticket, T0 + 350).await,
            TicketState::Waiting {
                position: i as u64 + 1
            },
            "ticket {i} lost its place"
        );
    }
    let report = backend
        .tick(&drop, &tick(T0 + 400, 2, config))
        .await
        .unwrap();
    assert_eq!(report.admitted, tickets[..report.admitted.len()].to_vec());
    assert!(!report.admitted.is_empty());
}

pub async fn an_ended_sale_closes_its_queue_for_good(backend: &dyn QueueBackend) {
    let drop = sale("ends");
    let config = room(1_000, 60);
    let (view, _) = join(backend, &drop, 1, T0).await;
    let mut ended = tick(T0, 10, config);
    ended.ended = true;
    let report = backend.tick(&drop, &ended).await.unwrap();
    assert_eq!(report.closed, Some(CloseReason::Ended));
    assert!(report.admitted.is_empty());
    let report = backend
        .tick(&drop, &tick(T0 + 100, 10, config))
        .await
        .unwrap();
    assert_eq!(
        report.closed,
        Some(CloseReason::Ended),
        "an ended sale never reopens"
    );
    let report = backend
        .tick(&drop, &tick(T0 + 200, 0, config))
        .await
        .unwrap();
    assert_eq!(
        report.closed,
        Some(CloseReason::Ended),
        "nor becomes sold out"
    );
    assert_eq!(
        state(backend, &view.ticket, T0).await,
        TicketState::Closed(CloseReason::Ended)
    );
    assert_eq!(
        backend
            .join(&fresh(&drop, 2, T0, false), T0, false)
            .await
            .unwrap(),
        JoinOutcome::Closed(CloseReason::Ended)
    );
}

pub async fn the_rooms_to_tick_are_listed_and_retired(backend: &dyn QueueBackend) {
    let (a, b) = (sale("listed-a"), sale("listed-b"));
    backend.register(&a).await.unwrap();
    backend.register(&b).await.unwrap();
    backend.register(&a).await.unwrap();
    let mut rooms = backend.rooms().await.unwrap();
    rooms.sort();
    assert_eq!(rooms, vec![a.clone(), b.clone()]);
    backend.retire(&a).await.unwrap();
    assert_eq!(backend.rooms().await.unwrap(), vec![b]);
}
