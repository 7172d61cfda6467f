//! Places in the queue: counted from the front, one ticket per buyer, a
//! uniformly random order for the early joiners.

use std::collections::HashMap;

use stockade_server::waiting_room::{JoinOutcome, QueueBackend, TicketState};

use super::helpers::{T0, fresh, join, room, sale, state, tick, user};

pub async fn positions_count_from_the_front_and_a_buyer_keeps_one_ticket(
    backend: &dyn QueueBackend,
) {
    let drop = sale("positions");
    let mut tickets = Vec::new();
    for i in 0..10 {
        let (view, created) = join(backend, &drop, i, T0).await;
        assert!(created);
        assert_eq!(
            view.state,
            TicketState::Waiting {
                position: i as u64 + 1
            }
        );
        assert_eq!(view.user, user(i));
        assert_eq!(view.ticket.sale(), drop);
        tickets.push(view.ticket);
    }
    let (again, created) = join(backend, &drop, 3, T0 + 5).await;
    assert!(!created, "the same buyer keeps one ticket");
    assert_eq!(again.ticket, tickets[3]);
    assert_eq!(again.state, TicketState::Waiting { position: 4 });
    // Three admitted from the front: everyone behind moves up by three.
    let config = room(1_000, 60);
    let report = backend.tick(&drop, &tick(T0, 100, config)).await.unwrap();
    assert_eq!(report.admitted, tickets[..1].to_vec());
    let report = backend
        .tick(&drop, &tick(T0 + 2, 100, config))
        .await
        .unwrap();
    assert_eq!(report.admitted, tickets[1..3].to_vec());
    assert_eq!(report.waiting, 7);
    assert_eq!(report.outstanding, 3);
    for (i, ticket) in tickets.iter().enumerate().skip(3) {
        assert_eq!(
            state(backend, ticket, T0 + 3).await,
            TicketState::Waiting {
                position: i as u64 - 2
            }
        );
    }
    assert_eq!(
        state(backend, &tickets[0], T0 + 3).await,
        TicketState::Admitted {
            until_ms: T0 + 60_000
        }
    );
    // An admitted buyer joining again gets the same (admitted) ticket.
    let (again, created) = join(backend, &drop, 0, T0 + 4).await;
    assert!(!created);
    assert_eq!(again.ticket, tickets[0]);
    assert!(matches!(again.state, TicketState::Admitted { .. }));
    // Tickets never issued, or of another sale, are unknown.
    assert_eq!(
        backend
            .ticket(&fresh(&drop, 999, T0, false), T0, false)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        backend
            .ticket(&fresh(&sale("elsewhere"), 999, T0, false), T0, false)
            .await
            .unwrap(),
        None
    );
}

/// Four buyers join before the start and one after: over many sales, every
/// order of the four is equally likely (chi-square, 23 degrees of freedom,
/// p = 0.001), and the late joiner always comes last.
pub async fn early_joiners_get_a_uniformly_random_order_at_the_start(backend: &dyn QueueBackend) {
    const RUNS: usize = 1_200;
    let config = room(1_000, 60);
    let mut counts: HashMap<Vec<usize>, usize> = HashMap::new();
    for run in 0..RUNS {
        let drop = sale(&format!("pre-{run}"));
        let mut early = Vec::new();
        for who in 0..4 {
            let JoinOutcome::Joined { view, created } = backend
                .join(&fresh(&drop, who, T0, true), T0, true)
                .await
                .unwrap()
            else {
                panic!("closed")
            };
            assert!(created);
            early.push(view.ticket);
        }
        // Before the start the positions are provisional but distinct.
        let mut positions = Vec::new();
        for ticket in &early {
            match state(backend, ticket, T0).await {
                TicketState::Waiting { position } => positions.push(position),
                other => panic!("{other:?}"),
            }
        }
        positions.sort_unstable();
        assert_eq!(positions, vec![1, 2, 3, 4]);
        let (late, _) = join(backend, &drop, 4, T0 + 1_000).await;
        let mut admitted = backend
            .tick(&drop, &tick(T0 + 1_000, 100, config))
            .await
            .unwrap()
            .admitted;
        admitted.extend(
            backend
                .tick(&drop, &tick(T0 + 1_010, 100, config))
                .await
                .unwrap()
                .admitted,
        );
        assert_eq!(admitted.len(), 5);
        assert_eq!(
            admitted[4], late.ticket,
            "later joins queue behind the pre-queue"
        );
        let order: Vec<usize> = admitted[..4]
            .iter()
            .map(|t| early.iter().position(|e| e == t).unwrap())
            .collect();
        *counts.entry(order).or_default() += 1;
    }
    assert_eq!(counts.len(), 24, "every order of four occurs: {counts:?}");
    let expected = RUNS as f64 / 24.0;
    let chi_square: f64 = counts
        .values()
        .map(|&n| (n as f64 - expected).powi(2) / expected)
        .sum();
    assert!(
        chi_square < 49.73,
        "chi-square {chi_square:.1} over 23 degrees of freedom: the pre-queue order is not uniform: {counts:?}"
    );
}
