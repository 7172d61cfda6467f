//! The waiting room over HTTP (issue 11, item 3), on the embedded default
//! and on two instances sharing one Redis and one PostgreSQL (and one
//! admission secret): the Admission-Token door, joins and polls, the
//! admission rate in real time, and a sell-out with 10,000 queued buyers.

mod admission;
mod bad_input;
mod creation;
mod front;
mod queue_flow;

use admission::{an_admission_buys_exactly_once, purchases_need_a_valid_admission_token};
use bad_input::queue_routes_refuse_bad_input_and_change_nothing;
use creation::a_new_sale_with_a_room_sells_without_a_rebuild;
use front::Front;
use queue_flow::{
    a_sell_out_with_10000_queued_buyers_closes_the_queue,
    expired_holds_reopen_the_queue_and_admit_more,
    stock_that_comes_back_reopens_the_queue_and_admits_more,
    the_admission_rate_is_kept_within_20_percent,
};

macro_rules! on_both {
    ($($scenario:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    crate::waiting_room_http::$scenario(crate::waiting_room_http::Front::embedded().await).await;
                }
            )*
        }
        mod two_instances_on_redis {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    crate::waiting_room_http::$scenario(crate::waiting_room_http::Front::two_on_redis().await).await;
                }
            )*
        }
    };
}

on_both!(
    purchases_need_a_valid_admission_token,
    queue_routes_refuse_bad_input_and_change_nothing,
    the_admission_rate_is_kept_within_20_percent,
    a_sell_out_with_10000_queued_buyers_closes_the_queue,
    stock_that_comes_back_reopens_the_queue_and_admits_more,
    expired_holds_reopen_the_queue_and_admit_more,
    an_admission_buys_exactly_once,
    a_new_sale_with_a_room_sells_without_a_rebuild,
);
