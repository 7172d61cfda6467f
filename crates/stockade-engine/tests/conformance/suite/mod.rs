//! The scenarios of the suite, each run on every engine it applies to
//! (see `main.rs`). Each takes a fresh [`Harness`].
//!
//! [`Harness`]: crate::harness::Harness

mod big_bundles;
mod durability;
mod epochs;
mod helpers;
mod purchases;
mod rebuild;
mod releases;
mod replays;
mod sales;
mod skus;
mod tiers;

pub use crate::batch_release::releases_in_one_call_are_each_decided_as_alone;
pub use big_bundles::a_crowd_of_big_bundles_sells_whole_bundles_only;
pub use durability::{
    an_accepted_purchase_is_committed_when_answered, durability_is_reported_for_each_engine,
};
pub use epochs::{close_and_rebuild_are_fenced_by_epochs, epochs_fence_purchases_and_releases};
pub use purchases::{
    a_buyer_asking_many_times_gets_one, crowd_of_10000_buyers_for_1000_items,
    per_user_limit_above_one, quantity_above_one_with_partial_availability,
    sale_window_opens_and_closes, seed_100_buyers_for_100_items, seed_150_buyers_for_100_items,
    unknown_sale,
};
pub use rebuild::{rebuild_from_committed_orders, rebuild_refuses_inconsistent_orders};
pub use releases::release_and_double_release;
pub use replays::{
    concurrent_replays_yield_one_order, idempotent_replay_yields_the_same_order,
    keys_are_scoped_to_their_buyer,
};
pub use sales::{
    a_retired_sale_is_forgotten, create_sale_is_idempotent_and_detects_conflicts,
    outbox_holds_accepted_orders_until_acknowledged,
};
pub use skus::{
    a_bundle_takes_every_item_or_none, a_crowd_of_bundles_never_oversells_any_sku,
    rebuild_keeps_skus_bundles_and_per_sku_holdings, skus_are_part_of_the_sale_spec,
    skus_have_their_own_stock_and_the_sale_sells_out_with_the_last,
    the_per_user_limit_spans_skus_and_the_per_sku_limit_caps_each,
};
pub use tiers::{
    a_members_cancel_returns_what_it_took_from_the_common_stock_first,
    a_tier_starts_earlier_takes_its_reserve_and_the_rest_is_released_on_time,
    members_keep_their_earlier_window_after_a_non_member_is_refused,
    rebuild_keeps_what_each_tier_holds,
};
