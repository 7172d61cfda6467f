//! The engine conformance suite: every scenario is written once, in
//! `suite/` and `properties.rs`, and run against every engine it applies
//! to.
//!
//! The engines are memory and Redis, which keep their own stock beside the
//! order store ([`Durability::Outbox`]), and the store deciding purchases
//! itself ([`stockade_store::StoreEngine`], [`Durability::Committed`]) on
//! PostgreSQL and on SQLite. Scenarios about the outbox, acknowledging,
//! closing and rebuilding run on the outbox engines only; the store
//! engines have a scenario of their own for what they promise instead.
//!
//! Redis runs its scripts as a Functions library (Redis 7, the default) in
//! `redis` and `redis_sharded`, and forced to EVALSHA (as on Redis 6, or
//! with `--redis-scripts eval`) in `redis_eval`. The `sim*` engines are the
//! same three on the simulator's in-process Redis (`stockade_sim::redis`),
//! reached through a `Connector`, in one thread with paused time.
//!
//! Tests are named `group::engine::scenario`, e.g.
//! `all_engines::sqlite::release_and_double_release`.
//!
//! [`Durability::Outbox`]: stockade_core::Durability::Outbox
//! [`Durability::Committed`]: stockade_core::Durability::Committed

mod batch_release;
mod bundles;
mod harness;
mod properties;
mod sharded;
mod suite;

/// One test per scenario on one engine: `mod $engine { $scenario, … }`.
/// The simulated Redis (`sim*`) runs in one thread with paused time, as
/// the simulator runs it.
macro_rules! on_engine {
    (@sim $engine:ident [$($scenario:ident),* $(,)?]) => {
        mod $engine {
            $(
                #[tokio::test(flavor = "current_thread", start_paused = true)]
                async fn $scenario() {
                    let harness = crate::harness::$engine().await;
                    crate::suite::$scenario(&harness).await;
                }
            )*
        }
    };
    (sim $scenarios:tt) => { on_engine!(@sim sim $scenarios); };
    (sim_eval $scenarios:tt) => { on_engine!(@sim sim_eval $scenarios); };
    (sim_sharded $scenarios:tt) => { on_engine!(@sim sim_sharded $scenarios); };
    ($engine:ident [$($scenario:ident),* $(,)?]) => {
        mod $engine {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    let harness = crate::harness::$engine().await;
                    crate::suite::$scenario(&harness).await;
                }
            )*
        }
    };
}

/// Every scenario listed on every engine listed:
/// `mod $group { mod $engine { $scenario, … } … }`.
macro_rules! conformance {
    ($group:ident on [$($engine:ident),* $(,)?]: $scenarios:tt) => {
        mod $group {
            $( on_engine!($engine $scenarios); )*
        }
    };
}

// Every engine, whatever its durability.
conformance!(all_engines on [memory, redis, redis_sharded, redis_eval, sim, sim_sharded, sim_eval, postgres, sqlite]: [
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
    unknown_sale,
    create_sale_is_idempotent_and_detects_conflicts,
    keys_are_scoped_to_their_buyer,
    epochs_fence_purchases_and_releases,
    releases_in_one_call_are_each_decided_as_alone,
    durability_is_reported_for_each_engine,
    skus_have_their_own_stock_and_the_sale_sells_out_with_the_last,
    a_bundle_takes_every_item_or_none,
    a_crowd_of_bundles_never_oversells_any_sku,
    a_crowd_of_big_bundles_sells_whole_bundles_only,
    the_per_user_limit_spans_skus_and_the_per_sku_limit_caps_each,
    skus_are_part_of_the_sale_spec,
    a_tier_starts_earlier_takes_its_reserve_and_the_rest_is_released_on_time,
    members_keep_their_earlier_window_after_a_non_member_is_refused,
    a_members_cancel_returns_what_it_took_from_the_common_stock_first,
]);

// The engines whose accepted orders wait in an outbox for the store
// (`Durability::Outbox`): acknowledged once committed, closed and rebuilt
// from the store.
conformance!(outbox_engines on [memory, redis, redis_sharded, redis_eval, sim, sim_sharded, sim_eval]: [
    outbox_holds_accepted_orders_until_acknowledged,
    rebuild_from_committed_orders,
    rebuild_refuses_inconsistent_orders,
    close_and_rebuild_are_fenced_by_epochs,
    rebuild_keeps_skus_bundles_and_per_sku_holdings,
    rebuild_keeps_what_each_tier_holds,
]);

// The store deciding purchases itself (`Durability::Committed`).
conformance!(committed_engines on [postgres, sqlite]: [
    an_accepted_purchase_is_committed_when_answered,
]);

// Engines that let an ended sale go (`Engine::retire`): the store engines
// keep every sale's orders (the store is their only copy).
conformance!(retiring_engines on [memory, redis, redis_sharded, redis_eval, sim, sim_sharded, sim_eval]: [
    a_retired_sale_is_forgotten,
]);

/// Random interleavings of purchases and releases, checked against a model
/// after every step (`properties.rs`). They only buy and release, so they
/// run on every engine, whatever its durability.
mod random_interleavings_keep_the_invariants {
    #[test]
    fn memory() {
        crate::properties::check(crate::harness::memory);
    }

    #[test]
    fn redis() {
        crate::properties::check(crate::harness::redis);
    }

    #[test]
    fn redis_sharded() {
        crate::properties::check(crate::harness::redis_sharded);
    }

    #[test]
    fn sim() {
        crate::properties::check(crate::harness::sim);
    }

    #[test]
    fn postgres() {
        crate::properties::check(crate::harness::postgres);
    }

    #[test]
    fn sqlite() {
        crate::properties::check(crate::harness::sqlite);
    }
}

/// Random bundles and releases on sales of several SKUs, checked against a
/// model per SKU after every step (`bundles.rs`).
mod random_bundles_keep_every_sku_exact {
    #[test]
    fn memory() {
        crate::bundles::check(crate::harness::memory);
    }

    #[test]
    fn redis() {
        crate::bundles::check(crate::harness::redis);
    }

    #[test]
    fn sim() {
        crate::bundles::check(crate::harness::sim);
    }

    #[test]
    fn postgres() {
        crate::bundles::check(crate::harness::postgres);
    }

    #[test]
    fn sqlite() {
        crate::bundles::check(crate::harness::sqlite);
    }
}
