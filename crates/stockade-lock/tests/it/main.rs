//! Integration tests against real, throwaway `redis-server` (and PostgreSQL)
//! processes. One binary, one module per concern.

mod cancellation;
mod exclusion;
mod faults;
mod fencing;
mod grant_channel;
mod handoff;
mod lease;
mod metrics;
mod redlock;
mod support;
mod waiting;
mod watchdog;
