//! What the servers did during a run, from their own counters: Redis
//! commands and their time from `INFO commandstats`, Redis's CPU time from
//! `INFO cpu`, PostgreSQL transactions from `pg_stat_database`, read before
//! and after the measured run.
//!
//! `INFO commandstats` counts every command Redis executed, including those
//! a Lua script runs with `redis.call`: it is the work Redis did, not the
//! number of round trips. It counts every client's commands, so on a shared
//! server the figure includes other traffic.
//!
//! Redis's time per purchase is measured two ways, since each misses
//! something. The commands' time (`usec` of `INFO commandstats`) is spent
//! executing commands only, measured by the wall clock (so a descheduled
//! server inflates it); a script's time includes the commands it runs,
//! which are also listed on their own, so those are counted once (see
//! [`RedisWork::command_us`]). The CPU time (`used_cpu_sys` +
//! `used_cpu_user`) is the whole server process: reading requests, writing
//! replies and the event loop as well, which for small commands is most of
//! it.
//!
//! PostgreSQL sessions report their transactions to the statistics system
//! lazily (up to seconds later). The strategies therefore force a report
//! before the first reading (`pg_stat_force_next_flush()`, PostgreSQL 15+),
//! and close their sessions before the second one: an ending session
//! reports everything. The monitor reads from another database when it can,
//! so that its own queries are not counted; when it must share the bench's
//! database it counts its own transactions and subtracts them.
//!
//! - `commandstats`: Redis's commands, their time and its CPU time;
//! - `transactions`: PostgreSQL's transactions.

mod commandstats;
mod transactions;

pub use commandstats::{
    CommandStat, RedisMonitor, RedisReading, RedisWork, SCRIPT_RUNNERS, parse_commandstats,
};
pub use transactions::{DatabaseTarget, PgMonitor, TransactionReading};
