//! The multi-instance fault suite: three `stockade serve` processes on one
//! Redis and one PostgreSQL database, a crowd of about 4,000 purchases
//! spread over them, faults injected mid-crowd, and a history checker that
//! judges docs/design.md's invariants 1-5 from every recorded answer and the
//! store's orders. One scenario sells three SKUs in bundles; the checker
//! then judges invariants 1 and 5 per SKU as well. Another (`draw_scenario`)
//! runs a draw sale and SIGKILLs the instance making the draw.
//!
//! Run it with
//! `cargo nextest run -p stockade --test multi_instance` (it starts its own
//! throwaway `redis-server` and PostgreSQL). Each scenario runs one round in
//! the suite (the simulator repeats its crowds and faults over many seeds),
//! three with `scripts/test --long` (`STOCKADE_SCENARIO_ROUNDS=3`), on the
//! same servers and instances, a fresh sale each.
//!
//! # Layout
//! - `flags`: the engine flags of `stockade serve` per scenario.
//! - `api`: the HTTP calls, each turned into a recorded answer.
//! - `keeper`: the one thread that starts and stops server processes.
//! - `instance`: one `stockade serve` child process.
//! - `cluster`: the servers and three instances of a scenario.
//! - `history`: what was asked and what came back.
//! - `plan`: the crowd of a round (buyers, quantities, keys, instances, and
//!   on a sale of several SKUs each purchase's bundle).
//! - `crowd`: sending the plan with bounded concurrency.
//! - `payment`: confirming a held order (the buyer paid), with retries.
//! - `faults`: the faults and the script that injects them.
//! - `healing`: readiness, selling out and settling after the faults.
//!   - `healing::sell_out`: the final phase's fresh buyers, one item each
//!     (of a SKU with items left, on a sale of several SKUs) until sold out
//!     everywhere.
//! - `evidence`: the checker's input, plain data.
//! - `checker`: invariants 1-5 over the evidence (tests: `checker_tests`,
//!   and `checker_sku_tests` for sales of several SKUs).
//!   - `checker::acknowledgements`: acknowledgements against the store (3).
//!   - `checker::holds`: payment holds: confirms (3), settling, expiries (5).
//!   - `checker::idempotency`: one order per key (4).
//!   - `checker::skus`: each order's items; per SKU, no oversell (1) and
//!     sold out (5).
//! - `round`: a scenario's rounds, from sale to verdict.
//! - `scenarios`: the tests, among them
//!   `bundles_with_redis_restarted_and_an_instance_killed` (three SKUs,
//!   bundles, Redis losing its data and an instance killed).
//! - `draw_scenario`: `a_draw_survives_an_instance_killed_mid_draw`: a draw
//!   sale entered by ~1,500 buyers over the three instances, the instance
//!   holding the draw's lease SIGKILLed mid-draw (and, in one round, a fake
//!   dead owner holding the lease first); one draw, the same everywhere,
//!   recomputable from the commitment (also by `scripts/verify-draw`), its
//!   winners' orders exactly the store's.
//!   - `draw_scenario::calls`: the draw calls, the crowd of entries and
//!     the auditor's `scripts/verify-draw`.
//!   - `draw_scenario::checks`: the verdict on the draw, the buyers'
//!     entries and the store's orders.
//! - `skew`: an instance's wall clock set ahead (libfaketime).
//! - `draw_edges`: two short draws at issue 35's edges, each judged by
//!   `draw_scenario::checks` and against the set frozen in the store:
//!   - `draw_edges::close_race`: entries racing the close on two instances
//!     whose clocks differ by 2 s;
//!   - `draw_edges::freeze_kill`: the drawing instance SIGKILLed between
//!     the freeze and the purchases (held there by a trigger).

mod api;
mod checker;
mod checker_sku_tests;
mod checker_tests;
mod cluster;
mod crowd;
mod draw_edges;
mod draw_scenario;
mod evidence;
mod faults;
mod flags;
mod healing;
mod history;
mod instance;
mod keeper;
mod payment;
mod plan;
mod round;
mod scenarios;
mod skew;
