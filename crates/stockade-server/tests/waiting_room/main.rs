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
                    crate::suite::$scenario(&backend).await;
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
                    crate::suite::$scenario(&backend).await;
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
);
