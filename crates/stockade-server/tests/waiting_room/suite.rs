//! The scenarios every backend must pass.

use std::collections::HashMap;
use std::time::Duration;

use stockade_core::{SaleId, UserId};
use stockade_server::waiting_room::rooms::next_place;
use stockade_server::waiting_room::token::AdmissionSigner;
use stockade_server::waiting_room::{
    CloseReason, JoinOutcome, PREQUEUE_PLACES, QueueBackend, RoomConfig, Tick, TicketId,
    TicketState, TicketView,
};

const T0: i64 = 1_800_000_000_000;

fn sale(id: &str) -> SaleId {
    SaleId::new(id).unwrap()
}

fn user(i: usize) -> UserId {
    UserId::new(format!("buyer|{i}")).unwrap()
}

/// The tickets' signer (the service's admission secret).
fn signer() -> AdmissionSigner {
    AdmissionSigner::new(b"the suite's admission secret....")
}

/// A ticket minted for a join of buyer `who` at `now_ms`, as the service
/// mints them (`WaitingRooms::fresh_ticket`).
fn fresh(sale: &SaleId, who: usize, now_ms: i64, prequeue: bool) -> TicketId {
    let place = if prequeue {
        rand::random_range(0..PREQUEUE_PLACES)
    } else {
        next_place(now_ms)
    };
    signer().mint_ticket(sale, place, &user(who))
}

fn room(rate: u32, ttl_seconds: u64) -> RoomConfig {
    RoomConfig::new(rate, Duration::from_secs(ttl_seconds), 1_500).unwrap()
}

/// A tick with a fresh stock figure (no admission used since it was read)
/// and no expiry grace.
fn tick(now_ms: i64, remaining: u32, config: RoomConfig) -> Tick {
    Tick {
        now_ms,
        started: true,
        ended: false,
        remaining,
        sold_out: remaining == 0,
        used_before: u64::MAX,
        expired_before_ms: now_ms,
        config,
    }
}

async fn join(
    backend: &dyn QueueBackend,
    sale: &SaleId,
    who: usize,
    now_ms: i64,
) -> (TicketView, bool) {
    match backend
        .join(&fresh(sale, who, now_ms, false), now_ms, false)
        .await
        .unwrap()
    {
        JoinOutcome::Joined { view, created } => (view, created),
        JoinOutcome::Closed(reason) => panic!("the queue is closed: {reason:?}"),
    }
}

async fn state(backend: &dyn QueueBackend, ticket: &TicketId, now_ms: i64) -> TicketState {
    backend
        .ticket(ticket, now_ms, false)
        .await
        .unwrap()
        .unwrap()
        .state
}

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
