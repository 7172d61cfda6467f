//! The server's tests, one binary: each module is what was a test binary
//! of its own (`cargo nextest run -p stockade-server -E 'test(/^holds::/)'`
//! runs one). One binary compiles the shared helpers, monomorphizes the
//! service and links once instead of forty times: rebuilding the server's
//! tests took 175 s of CPU as forty binaries and 26 s as one.

mod common;
mod instances;
mod scrape;

mod alert_series;
mod async_intake;
mod big_bundles;
mod buyer_ids;
mod dashboard;
mod draw_audit;
mod draw_fences;
mod draw_page;
mod draw_rolldown;
mod draws;
mod faults;
mod holds;
mod http;
mod identity;
mod identity_claims;
mod listener;
mod lookups;
mod metrics;
mod order_times;
mod payments;
mod rate_limits;
mod redis_scripts;
mod rejections;
mod releases;
mod replays;
mod reserve_instant;
mod retention;
mod router;
mod shards;
mod shedding;
mod skus;
mod surface;
mod tiers;
mod waiting_page;
mod waiting_room;
mod waiting_room_faults;
mod waiting_room_http;
mod writer;
