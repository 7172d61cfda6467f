//! The waiting-room backends, both run through one suite: in memory (the
//! embedded default) and in a throwaway Redis (several instances). Time is
//! passed in by hand, so rates are exact and no test sleeps.

mod suite;

macro_rules! on_every_backend {
    ($($scenario:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $scenario() {
                    let backend = stockade_server::waiting_room::memory::MemoryQueues::new();
                    crate::waiting_room::suite::$scenario(&backend).await;
                }
            )*
        }
        mod redis {
            $(
                #[tokio::test]
                async fn $scenario() {
                    let (_server, backend) = crate::waiting_room::in_redis().await;
                    crate::waiting_room::suite::$scenario(&backend).await;
                }
            )*
        }
    };
}

on_every_backend!(
    positions_count_from_the_front_and_a_buyer_keeps_one_ticket,
    admissions_follow_the_rate_however_many_tickers,
    outstanding_admissions_never_exceed_the_stock_times_the_factor,
    sold_out_closes_every_waiting_ticket_and_returned_stock_reopens,
    a_zero_stock_reading_the_store_does_not_confirm_keeps_every_place,
    an_ended_sale_closes_its_queue_for_good,
    an_unused_admission_expires_and_its_buyer_may_queue_again,
    early_joiners_get_a_uniformly_random_order_at_the_start,
    the_rooms_to_tick_are_listed_and_retired,
    a_crowd_joining_and_polling_at_once_is_answered_as_if_one_by_one,
);

/// A throwaway Redis and the queues in it (keep the server alive).
async fn in_redis() -> (
    stockade_test_support::RedisServer,
    stockade_server::waiting_room::redis::RedisQueues,
) {
    let server = stockade_test_support::RedisServer::start().unwrap();
    let backend =
        stockade_server::waiting_room::redis::RedisQueues::connect(&server.url(), "test:wr:")
            .await
            .unwrap();
    (server, backend)
}

/// In Redis, the joins and polls of one sale that arrive together share
/// calls: a crowd costs far fewer script calls than it has requests.
#[tokio::test]
async fn in_redis_a_crowd_of_joins_and_polls_shares_calls() {
    use futures::future::join_all;
    use stockade_server::waiting_room::{JoinOutcome, QueueBackend};

    let (server, backend) = in_redis().await;
    let drop = suite::helpers::sale("shared-calls");
    let now = suite::helpers::T0;
    let crowd = 400;
    let tickets: Vec<_> = (0..crowd)
        .map(|i| suite::helpers::fresh(&drop, i, now, false))
        .collect();
    let calls_before = server.script_calls().unwrap();
    let joined = join_all(tickets.iter().map(|t| backend.join(t, now, false))).await;
    let join_calls = server.script_calls().unwrap() - calls_before;
    assert!(
        joined
            .iter()
            .all(|j| matches!(j, Ok(JoinOutcome::Joined { created: true, .. })))
    );
    let polled = join_all(tickets.iter().map(|t| backend.ticket(t, now, false))).await;
    let poll_calls = server.script_calls().unwrap() - calls_before - join_calls;
    assert!(polled.iter().all(|p| matches!(p, Ok(Some(_)))));
    // A call per request would be 400 each; batches of up to 256 make two
    // or a few more (the first goes alone, before the rest have queued).
    assert!(
        join_calls <= crowd as u64 / 20 && poll_calls <= crowd as u64 / 20,
        "{crowd} joins took {join_calls} calls and {crowd} polls {poll_calls}"
    );
}

/// A buyer's later join answered by a primary that was then deposed (or
/// that lost the write) left its ticket unknown to the new primary, which
/// still holds the buyer's earlier ticket: the later ticket, polled, is put
/// back and supersedes the earlier one, as the lost join did. The earlier
/// ticket stays unknown, and a live admission is never superseded (the
/// buyer's next join is answered with it). Simulator seed `0x5eed0018`
/// (buyer u844), where every poll was 404 `unknown_ticket` before.
#[tokio::test]
async fn in_redis_a_later_ticket_only_a_lost_primary_saw_is_put_back() {
    use stockade_server::waiting_room::{JoinOutcome, QueueBackend, TicketState};
    use suite::helpers::{T0, fresh, join, room, sale, state, tick};

    let (_server, backend) = in_redis().await;
    let drop = sale("lost-later-join");
    let (first, _) = join(&backend, &drop, 7, T0).await;
    let (behind, _) = join(&backend, &drop, 8, T0 + 10).await;
    // Buyer 7's second join, at a later place, seen only by the lost writes.
    let later = fresh(&drop, 7, T0 + 20, false);
    assert!(later.place() > first.ticket.place());
    assert_eq!(backend.ticket(&later, T0 + 30, false).await.unwrap(), None);
    let restored = backend.ticket(&later, T0 + 30, true).await.unwrap();
    assert_eq!(
        restored.map(|v| v.state),
        Some(TicketState::Waiting { position: 2 }),
        "the later ticket is put back at its own place, behind buyer 8"
    );
    assert_eq!(
        state(&backend, &behind.ticket, T0 + 30).await,
        TicketState::Waiting { position: 1 }
    );
    // The earlier ticket is superseded, and stays so when polled.
    assert_eq!(
        backend.ticket(&first.ticket, T0 + 40, true).await.unwrap(),
        None
    );
    match backend
        .join(&fresh(&drop, 7, T0 + 50, false), T0 + 50, false)
        .await
        .unwrap()
    {
        JoinOutcome::Joined { view, created } => {
            assert!(!created);
            assert_eq!(
                view.ticket, later,
                "the buyer keeps one ticket: the later one"
            );
        }
        JoinOutcome::Closed(reason) => panic!("closed: {reason:?}"),
    }

    // A live admission is never superseded by a ticket polled later.
    let admitted = sale("lost-later-join-admitted");
    let (front, _) = join(&backend, &admitted, 1, T0).await;
    let report = backend
        .tick(&admitted, &tick(T0, 100, room(1_000, 60)))
        .await
        .unwrap();
    assert_eq!(report.admitted, vec![front.ticket.clone()]);
    let later = fresh(&admitted, 1, T0 + 20, false);
    assert_eq!(backend.ticket(&later, T0 + 30, true).await.unwrap(), None);
    assert!(matches!(
        state(&backend, &front.ticket, T0 + 30).await,
        TicketState::Admitted { .. }
    ));
}
