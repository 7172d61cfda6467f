//! The scenarios every backend must pass.

mod admissions;
mod closing;
mod crowd;
pub mod helpers;
mod places;

pub use admissions::{
    admissions_follow_the_rate_however_many_tickers,
    an_unused_admission_expires_and_its_buyer_may_queue_again,
    outstanding_admissions_never_exceed_the_stock_times_the_factor,
};
pub use closing::{
    a_zero_stock_reading_the_store_does_not_confirm_keeps_every_place,
    an_ended_sale_closes_its_queue_for_good,
    sold_out_closes_every_waiting_ticket_and_returned_stock_reopens,
    the_rooms_to_tick_are_listed_and_retired,
};
pub use crowd::a_crowd_joining_and_polling_at_once_is_answered_as_if_one_by_one;
pub use places::{
    early_joiners_get_a_uniformly_random_order_at_the_start,
    positions_count_from_the_front_and_a_buyer_keeps_one_ticket,
};
