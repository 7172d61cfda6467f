//! The engine conformance suite: every scenario is written once, in
//! `suite/` and `properties.rs`, and run against every engine.

mod batch_release;
mod harness;
mod properties;
mod suite;

macro_rules! conformance {
    ($engine:ident: $($scenario:ident),* $(,)?) => {
        mod $engine {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    let harness = crate::harness::$engine().await;
                    crate::suite::$scenario(&harness).await;
                }
            )*

            #[test]
            fn random_interleavings_keep_the_invariants() {
                crate::properties::check(|| crate::harness::$engine());
            }
        }
    };
}

macro_rules! all_engines {
    ($($scenario:ident),* $(,)?) => {
        conformance!(memory: $($scenario),*);
        conformance!(redis: $($scenario),*);
        conformance!(postgres: $($scenario),*);
    };
}

all_engines!(
    seed_100_buyers_for_100_items,
    seed_150_buyers_for_100_items,
    crowd_of_10000_buyers_for_1000_items,
    a_buyer_asking_many_times_gets_one,
    per_user_limit_above_one,
    quantity_above_one_with_partial_availability,
    sale_window_opens_and_closes,
    idempotent_replay_yields_the_same_order,
    concurrent_replays_yield_one_order,
    release_and_double_release,
    rebuild_from_committed_orders,
    rebuild_refuses_inconsistent_orders,
    unknown_sale,
    create_sale_is_idempotent_and_detects_conflicts,
    outbox_holds_accepted_orders_until_acknowledged,
    keys_are_scoped_to_their_buyer,
    epochs_fence_purchases_releases_and_rebuilds,
    releases_in_one_call_are_each_decided_as_alone,
);

/// Engines that let an ended sale go ([`stockade_core::Engine::retire`]):
/// the PostgreSQL engine keeps its rows (they are its only copy).
macro_rules! retiring_engines {
    ($($engine:ident => $module:ident),* $(,)?) => {
        $(
            mod $module {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn a_retired_sale_is_forgotten() {
                    let harness = crate::harness::$engine().await;
                    crate::suite::a_retired_sale_is_forgotten(&harness).await;
                }
            }
        )*
    };
}

retiring_engines!(memory => memory_retire, redis => redis_retire);
