//! Stockade's deterministic simulator: the real service, several instances
//! of it, in one process and one thread, with time, randomness, the network
//! and the servers (Redis, the store) simulated, so that any run is
//! replayed exactly from its seed.

pub mod redis;
