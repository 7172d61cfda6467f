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
                    let server = stockade_test_support::RedisServer::start().unwrap();
                    let backend = stockade_server::waiting_room::redis::RedisQueues::connect(
                        &server.url(),
                        "test:wr:",
                    )
                    .await
                    .unwrap();
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

/// In Redis, the joins and polls of one sale that arrive together share
/// calls: a crowd costs far fewer script calls than it has requests.
#[tokio::test]
async fn in_redis_a_crowd_of_joins_and_polls_shares_calls() {
    use futures::future::join_all;
    use stockade_server::waiting_room::{JoinOutcome, QueueBackend};

    let server = stockade_test_support::RedisServer::start().unwrap();
    let backend =
        stockade_server::waiting_room::redis::RedisQueues::connect(&server.url(), "test:wr:")
            .await
            .unwrap();
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
