//! The engine flags of `stockade serve` each scenario runs with.

/// Which engine the instances of a scenario run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// The Redis engine; purchases are refused (503) while Redis is away.
    Redis,
    /// The Redis engine with the PostgreSQL engine as fallback.
    RedisWithPostgresFallback,
    /// The PostgreSQL engine only: no Redis at all.
    Postgres,
    /// The Redis engine on the primary of a Sentinel group (a primary, a
    /// replica, three sentinels), through a `redis+sentinel://` URL.
    RedisSentinel,
    /// The Redis engine on a three-primary Redis Cluster, through a
    /// `redis+cluster://` URL.
    RedisCluster,
}

impl Engine {
    /// Whether the scenario needs a Redis server.
    pub fn needs_redis(self) -> bool {
        self != Engine::Postgres
    }

    /// The `stockade serve` arguments that choose this engine and name the
    /// servers (everything but `--listen` and `--data-dir`).
    pub fn serve_args(self, redis_url: Option<&str>, database_url: &str) -> Vec<String> {
        let mut args: Vec<&str> = Vec::new();
        match self {
            Engine::Redis | Engine::RedisSentinel | Engine::RedisCluster => {
                args.extend(["--engine", "redis"]);
            }
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
