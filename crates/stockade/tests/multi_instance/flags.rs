//! The engine flags of `stockade serve`, behind one switch.
//!
//! Today `stockade serve` has no `--engine` flag: the engine is Redis when
//! `--redis-url` is given. Issue 8 adds `--engine redis|postgres` and
//! `--fallback postgres`. To run the suite with them:
//! 1. set [`ENGINE_FLAGS_SUPPORTED`] to `true` (the Redis scenarios then
//!    pass `--engine redis` too);
//! 2. delete the `#[ignore = "needs --engine (issue 8)"]` lines in
//!    `scenarios.rs` (the fallback and PostgreSQL-engine scenarios).

/// Whether `stockade serve` takes `--engine` and `--fallback` (issue 8).
pub const ENGINE_FLAGS_SUPPORTED: bool = false;

/// Which engine the instances of a scenario run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The Redis engine; purchases are refused (503) while Redis is away.
    Redis,
    /// The Redis engine with the PostgreSQL engine as fallback.
    RedisWithPostgresFallback,
    /// The PostgreSQL engine only: no Redis at all.
    Postgres,
}

impl Engine {
    /// Whether the scenario needs a Redis server.
    pub fn needs_redis(self) -> bool {
        self != Engine::Postgres
    }

    /// The `stockade serve` arguments that choose this engine and name the
    /// servers (everything but `--listen` and `--data-dir`).
    pub fn serve_args(self, redis_url: Option<&str>, database_url: &str) -> Vec<String> {
        assert!(
            ENGINE_FLAGS_SUPPORTED || self == Engine::Redis,
            "{self:?} needs `stockade serve --engine/--fallback` (issue 8): \
             set ENGINE_FLAGS_SUPPORTED in tests/multi_instance/flags.rs"
        );
        let mut args: Vec<&str> = Vec::new();
        match self {
            Engine::Redis if ENGINE_FLAGS_SUPPORTED => args.extend(["--engine", "redis"]),
            Engine::Redis => {}
            Engine::RedisWithPostgresFallback => {
                args.extend(["--engine", "redis", "--fallback", "postgres"]);
            }
            Engine::Postgres => args.extend(["--engine", "postgres"]),
        }
        if self.needs_redis() {
            let url = redis_url.expect("a Redis engine needs a Redis URL");
            args.extend(["--redis-url", url]);
        }
        args.extend(["--database-url", database_url]);
        args.into_iter().map(str::to_owned).collect()
    }
}
