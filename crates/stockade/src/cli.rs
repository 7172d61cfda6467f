//! The command-line grammar.

#[cfg(feature = "bench")]
use std::path::PathBuf;
#[cfg(feature = "bench")]
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
#[cfg(feature = "bench")]
use stockade_bench::scenario::{Overrides, Scenario};
#[cfg(feature = "bench")]
use stockade_bench::strategy::StrategyKind;

/// Stockade sells limited stock to a stampede: flash sales, coupon drops,
/// sneaker and ticket releases. Correct under any concurrency.
#[derive(Debug, Parser)]
#[command(name = "stockade", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service. With no settings: the in-memory engine and a
    /// SQLite order store in ./stockade-data.
    Serve(Box<ServeArgs>),
    #[cfg(feature = "bench")]
    /// Simulate a flash sale: start the service in-process, then N buyers
    /// with distinct ids arrive at once over HTTP for S items; print what
    /// happened and check that nothing was oversold and every 201 was
    /// committed.
    Demo(DemoArgs),
    #[cfg(feature = "bench")]
    /// Compare every way of selling limited stock side by side in one run:
    /// the founding articles' strategies (row lock, conditional update,
    /// Redis lock, DECR, Lua script) and Stockade's engines, on the same
    /// Redis and PostgreSQL, each checked for correctness. Reports the work
    /// each made the servers do, including Redis's time per purchase from
    /// INFO commandstats and INFO cpu (for Redis's CPU per purchase at the
    /// limit: --buyers 50000 --stock 20000 --concurrency 256 --strategies
    /// redis-lua,stockade-redis).
    Bench(BenchArgs),
    #[cfg(feature = "bench")]
    /// Drive a running `stockade serve` over HTTP: create a sale through the
    /// admin API, send a crowd of buyers over keep-alive connections, and
    /// report the same measures and checks as `bench`, plus status codes.
    Load(LoadArgs),
}

#[cfg(feature = "bench")]
/// `stockade demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How many buyers arrive (each asks for one item).
    #[arg(long, default_value_t = 10_000)]
    pub buyers: usize,
    /// How many items are on sale.
    #[arg(long, default_value_t = 1_000)]
    pub stock: u32,
    /// How many buyers are in flight at once (default: all of them with
    /// --direct, 256 keep-alive connections over HTTP).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Which engine decides the purchases: memory or redis (and, with
    /// --direct, postgres).
    #[arg(long, value_enum, default_value_t = DemoEngine::Memory)]
    pub engine: DemoEngine,
    /// Redis for --engine redis (default: start a throwaway redis-server).
    #[arg(long, env = "STOCKADE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// PostgreSQL: the order store of the service (default: SQLite in a
    /// temporary directory), or with --direct --engine postgres the engine's
    /// database (default: a throwaway server).
    #[arg(long, env = "STOCKADE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Call the engine in-process instead of going through the HTTP service:
    /// the engine alone, without the order store.
    #[arg(long)]
    pub direct: bool,
    /// Print the result as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Run a sale with payment holds of this many seconds (1 to 86400):
    /// orders are held, a share of the buyers (--pay-ratio) pay within the
    /// hold, the other holds expire and their items are sold again to a
    /// second crowd; the store's orders are checked at the end.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub hold_seconds: Option<u64>,
    /// With --hold-seconds: the share of buyers with an order who pay, 0 to 1.
    #[arg(long, default_value_t = 0.7, requires = "hold_seconds")]
    pub pay_ratio: f64,
}

#[cfg(feature = "bench")]
/// The engines `stockade demo` can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DemoEngine {
    /// In this process.
    Memory,
    /// Redis, one Lua script per purchase.
    Redis,
    /// PostgreSQL, a row-locking transaction per purchase (--direct only).
    Postgres,
}

#[cfg(feature = "bench")]
impl DemoEngine {
    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Redis => "redis",
            Self::Postgres => "postgres",
        }
    }
}

#[cfg(feature = "bench")]
/// `stockade bench`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    /// Another benchmark instead of the strategy comparison.
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// The crowd.
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Which strategies, comma-separated (default: all): pg-for-update,
    /// pg-conditional, redis-lock, redis-decr, redis-lua, stockade-redis,
    /// stockade-postgres, stockade-memory.
    #[arg(long, value_delimiter = ',', value_parser = parse_strategy)]
    pub strategies: Option<Vec<StrategyKind>>,
    /// Connections per pool (the Redis pools of the hand-written strategies
    /// and every PostgreSQL pool).
    #[arg(long, default_value_t = 32)]
    pub pool_size: u32,
    /// Redis to use (default: start a throwaway redis-server). On a named
    /// server the bench writes only keys under `stockade-bench:`.
    #[arg(long, env = "STOCKADE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// PostgreSQL database to use (default: start a throwaway server with
    /// fsync on). On a named database the bench creates its own
    /// `stockade_bench_*` tables and the engine's `engine_*` tables.
    #[arg(long, env = "STOCKADE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Print the results as one JSON object `{"results": [...]}` instead of
    /// a table.
    #[arg(long)]
    pub json: bool,
    /// Also write an SVG chart of requests per second and p99 latency per
    /// strategy to this file.
    #[arg(long, value_name = "FILE")]
    pub chart: Option<PathBuf>,
}

#[cfg(feature = "bench")]
/// The other benchmarks of `stockade bench`.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The lock library against `rslock` on the same Redis: hand-off
    /// latency while a crowd of waiters drains through one lock,
    /// acquisitions per second, Redis commands per acquisition.
    Lock(LockArgs),
    /// `stockade serve` over HTTP against a bare axum handler that parses
    /// and echoes the purchase, with the same keep-alive crowd: committed
    /// purchases, then sold-out rejections, each target's figures next to
    /// the baseline's from the run just before, and the ratio.
    Http(HttpArgs),
    /// The bare handler `stockade bench http` compares with (it starts this
    /// itself, as a child process).
    #[command(hide = true)]
    HttpBaseline(HttpBaselineArgs),
}

#[cfg(feature = "bench")]
/// `stockade bench http`.
#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Keep-alive connections, one request in flight on each.
    #[arg(long, default_value_t = stockade_bench::http_bench::DEFAULT_CONNECTIONS)]
    pub connections: usize,
    /// Length of each phase of each target (10s, 500ms, 1m).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Which `stockade serve` setups, comma-separated: embedded (the
    /// default: in-memory engine, SQLite store), redis-sqlite, redis-postgres.
    /// Default: embedded, plus redis-sqlite with --redis-url and
    /// redis-postgres with --database-url.
    #[arg(long, value_delimiter = ',', value_enum)]
    pub targets: Option<Vec<ServeSetup>>,
    /// Redis of the redis-* setups (default: start a throwaway
    /// redis-server).
    #[arg(long, env = "STOCKADE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// PostgreSQL order store of redis-postgres (default: a throwaway
    /// server).
    #[arg(long, env = "STOCKADE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Print the results as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "bench")]
/// The `stockade serve` setups `stockade bench http` can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeSetup {
    /// The in-memory engine and an SQLite store: `stockade serve` with no
    /// settings.
    Embedded,
    /// The Redis engine and an SQLite store.
    RedisSqlite,
    /// The Redis engine and a PostgreSQL store.
    RedisPostgres,
}

#[cfg(feature = "bench")]
impl ServeSetup {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Embedded => "embedded",
            Self::RedisSqlite => "redis-sqlite",
            Self::RedisPostgres => "redis-postgres",
        }
    }
}

#[cfg(feature = "bench")]
/// `stockade bench http-baseline`.
#[derive(Debug, Args)]
pub struct HttpBaselineArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
}

#[cfg(feature = "bench")]
/// `stockade bench lock`.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// Redis to use (default: start a throwaway redis-server).
    #[arg(long, env = "STOCKADE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Tasks contending for the lock.
    #[arg(long, default_value_t = 64)]
    pub waiters: usize,
    /// Lock clients the waiters are spread over (each with its own
    /// connections).
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Measurement window per library (after a warm-up).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Print the results as one JSON object `{"results": [...]}`.
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "bench")]
/// The crowd of `bench` and `load`.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// The scenario: seed-100 (100 buyers, 100 items), seed-150 (150 / 100),
    /// crowd (10,000 / 1,000), sustained (stock that never runs out, for
    /// --duration), double-tap (1,000 buyers tapping twice, 1,000 items).
    /// Default: seed-100, unless --buyers or --duration describe a custom
    /// run.
    #[arg(long, value_parser = parse_scenario)]
    pub scenario: Option<Scenario>,
    /// Buyers in the crowd (each with a distinct id).
    #[arg(long)]
    pub buyers: Option<usize>,
    /// Items on sale.
    #[arg(long)]
    pub stock: Option<u32>,
    /// Requests in flight at once (default for bench: the whole crowd, up to
    /// 10,000, or 64 for a timed run).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Send new buyers for this long instead of a fixed crowd (10s, 500ms,
    /// 2m).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Requests each buyer sends at once (an impatient double tap is 2).
    #[arg(long)]
    pub taps: Option<usize>,
}

#[cfg(feature = "bench")]
impl WorkloadArgs {
    /// The named scenario, or the article's seed when nothing describes a
    /// custom run.
    pub fn scenario(&self) -> Option<Scenario> {
        self.scenario.or_else(|| {
            (self.buyers.is_none() && self.duration.is_none()).then_some(Scenario::Seed100)
        })
    }

    /// The adjustments to the scenario.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            buyers: self.buyers,
            stock: self.stock,
            concurrency: self.concurrency,
            duration: self.duration,
            taps: self.taps,
        }
    }
}

#[cfg(feature = "bench")]
/// `stockade load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The service, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    pub url: String,
    /// The service's admin token (to create the sale and list its orders).
    #[arg(long, env = "STOCKADE_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: String,
    /// The crowd (over HTTP, one keep-alive connection per request in
    /// flight; --concurrency defaults to the crowd, up to 256).
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// Print the result as one JSON object `{"results": [...]}`.
    #[arg(long)]
    pub json: bool,
    /// Create the sale with a payment hold of this many seconds (1 to
    /// 86400): orders are answered `held` (for comparing throughput with
    /// and without holds).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub hold_seconds: Option<u64>,
}

#[cfg(feature = "bench")]
fn parse_scenario(value: &str) -> Result<Scenario, String> {
    value.parse()
}

#[cfg(feature = "bench")]
fn parse_strategy(value: &str) -> Result<StrategyKind, String> {
    value.trim().parse()
}

#[cfg(feature = "bench")]
fn parse_duration(value: &str) -> Result<Duration, String> {
    stockade_bench::scenario::parse_duration(value)
}

/// `stockade serve`. Every flag also reads from its `STOCKADE_*` variable
/// and from the `--config` file; flags win, then variables, then the file.
/// The admin token comes from `STOCKADE_ADMIN_TOKEN` (or the file's
/// `admin_token`) only. The table after the flags in `--help` is generated
/// from `stockade_server::config::settings::SETTINGS`.
#[derive(Debug, Args)]
#[command(after_help = stockade_server::config::settings::help_table())]
pub struct ServeArgs {
    /// Address to listen on (STOCKADE_LISTEN; default 127.0.0.1:8080).
    #[arg(long)]
    pub listen: Option<String>,
    /// Directory of the embedded SQLite store (STOCKADE_DATA_DIR; default
    /// ./stockade-data).
    #[arg(long)]
    pub data_dir: Option<std::path::PathBuf>,
    /// Which engine decides purchases (STOCKADE_ENGINE; default memory):
    /// memory (one instance), redis (needs --redis-url; any number of
    /// instances), postgres (the PostgreSQL store decides each purchase;
    /// needs a postgres:// --database-url).
    #[arg(long)]
    pub engine: Option<String>,
    /// What decides purchases while Redis is unavailable (STOCKADE_FALLBACK;
    /// default none: 503): postgres moves the sales to the PostgreSQL store
    /// and back once Redis is healthy (needs --engine redis and a
    /// postgres:// --database-url).
    #[arg(long)]
    pub fallback: Option<String>,
    /// The Redis of --engine redis (STOCKADE_REDIS_URL): redis://host:6379
    /// (rediss:// for TLS), redis+sentinel://host:26379,host2:26379/mymaster
    /// (the primary Sentinel names, followed across failovers) or
    /// redis+cluster://host:6379,host2:6379 (a Redis Cluster).
    #[arg(long)]
    pub redis_url: Option<String>,
    /// The first part of every Redis key (STOCKADE_REDIS_KEY_PREFIX;
    /// default stockade): give each deployment sharing a Redis its own.
    #[arg(long)]
    pub redis_key_prefix: Option<String>,
    /// Keep orders in this PostgreSQL database (STOCKADE_DATABASE_URL).
    /// Shown only as host:port in messages.
    #[arg(long)]
    pub database_url: Option<String>,
    /// A TOML file with the same settings, under the keys of the table
    /// below (e.g. commit_deadline_ms = 3000).
    #[arg(long)]
    pub config: Option<std::path::PathBuf>,
    /// How long a purchase waits for its commit before answering 202
    /// pending (STOCKADE_COMMIT_DEADLINE_MS; default 2000).
    #[arg(long)]
    pub commit_deadline_ms: Option<u64>,
    /// Most orders per store transaction (STOCKADE_BATCH_MAX; default 512).
    #[arg(long)]
    pub batch_max: Option<usize>,
    /// Longest wait for a batch to fill (STOCKADE_BATCH_DELAY_MS; default 2).
    #[arg(long)]
    pub batch_delay_ms: Option<u64>,
    /// How old an accepted order still missing from the store must be
    /// before the reconciler commits it itself; longer than the commit
    /// deadline (STOCKADE_OUTBOX_GRACE_MS; default 10000).
    #[arg(long)]
    pub outbox_grace_ms: Option<u64>,
    /// How long this instance answers sold_out and unknown_sale from what
    /// it learned, without asking Redis or the database
    /// (STOCKADE_REJECTION_TTL_MS; default 500, at most 1000, 0: never).
    /// Stock given back through another instance is sold here again within
    /// this bound; not started and ended always come from the sale's times.
    #[arg(long)]
    pub rejection_ttl_ms: Option<u64>,
    /// Most purchases in flight on this instance; one more is answered at
    /// once with 503 overloaded and Retry-After: 1, selling nothing
    /// (STOCKADE_MAX_PURCHASES_IN_FLIGHT; default 4096, at least 1).
    #[arg(long)]
    pub max_purchases_in_flight: Option<u64>,
    /// Verify buyers: HS256 JWTs signed with this secret, at least 32
    /// bytes (STOCKADE_JWT_SECRET; prefer the variable, a flag shows in
    /// `ps`). Purchases and order routes then need Authorization: Bearer
    /// <jwt> and the buyer is its sub. Default: off, the service trusts
    /// its caller to name the buyer.
    #[arg(long)]
    pub jwt_secret: Option<String>,
    /// Verify buyers: HS256 JWTs signed with the secret in this file
    /// (STOCKADE_JWT_SECRET_FILE), instead of --jwt-secret.
    #[arg(long, value_name = "FILE")]
    pub jwt_secret_file: Option<std::path::PathBuf>,
    /// The payment service's bearer token, at least 16 characters
    /// (STOCKADE_PAYMENTS_TOKEN; prefer the variable or
    /// --payments-token-file, a flag shows in `ps`). POST
    /// /v1/orders/{id}/confirm is the payment service's callback: it needs
    /// this token or the admin token; buyers cannot confirm. Default: none,
    /// only the admin confirms.
    #[arg(long)]
    pub payments_token: Option<String>,
    /// A file holding the payments token (STOCKADE_PAYMENTS_TOKEN_FILE).
    #[arg(long, value_name = "FILE")]
    pub payments_token_file: Option<std::path::PathBuf>,
    /// Verify buyers: RS256 or ES256 JWTs checked with this PEM public key
    /// file (STOCKADE_JWT_PUBLIC_KEY).
    #[arg(long, value_name = "FILE")]
    pub jwt_public_key: Option<std::path::PathBuf>,
    /// The iss buyers' JWTs must carry (STOCKADE_JWT_ISSUER).
    #[arg(long)]
    pub jwt_issuer: Option<String>,
    /// The aud buyers' JWTs must carry (STOCKADE_JWT_AUDIENCE).
    #[arg(long)]
    pub jwt_audience: Option<String>,
    /// Requests per buyer, e.g. 5/s, 60/m, 1000/h; over it 429
    /// rate_limited (STOCKADE_RATE_LIMIT_BUYER; default: no limit).
    /// Shared by every instance through Redis with --engine redis.
    #[arg(long, value_name = "RATE")]
    pub rate_limit_buyer: Option<String>,
    /// A buyer's requests accepted at once after a quiet spell
    /// (STOCKADE_RATE_LIMIT_BUYER_BURST; default: the rate's count).
    #[arg(long, value_name = "N")]
    pub rate_limit_buyer_burst: Option<u64>,
    /// Requests per client address (an IPv6 client by its /64), e.g. 50/s
    /// (STOCKADE_RATE_LIMIT_IP; default: no limit). The admin token is
    /// never limited.
    #[arg(long, value_name = "RATE")]
    pub rate_limit_ip: Option<String>,
    /// A client's requests accepted at once (STOCKADE_RATE_LIMIT_IP_BURST;
    /// default: the rate's count).
    #[arg(long, value_name = "N")]
    pub rate_limit_ip_burst: Option<u64>,
    /// How many instances share the rate limits in Redis
    /// (STOCKADE_RATE_LIMIT_INSTANCES; default 1): while Redis does not
    /// answer within 50 ms, each instance enforces that share of every
    /// limit alone.
    #[arg(long, value_name = "N")]
    pub rate_limit_instances: Option<u64>,
    /// Proxies whose X-Forwarded-For names the client: comma-separated
    /// addresses and CIDR ranges, e.g. 10.0.0.0/8,192.168.1.7
    /// (STOCKADE_TRUSTED_PROXIES; default: none, the header is ignored).
    #[arg(long, value_name = "LIST")]
    pub trusted_proxies: Option<String>,
    /// How long start waits for a database or Redis that does not accept
    /// connections yet (STOCKADE_STARTUP_WAIT_MS; default 10000, 0: fail at
    /// once).
    #[arg(long)]
    pub startup_wait_ms: Option<u64>,
    /// How long a client may take to send a request's headers, counted from
    /// when it connected or got its previous answer, and then the body they
    /// announce; slower clients are disconnected
    /// (STOCKADE_HEADER_READ_TIMEOUT_MS; default 5000).
    #[arg(long)]
    pub header_read_timeout_ms: Option<u64>,
    /// How long a keep-alive connection may stay open without a request
    /// (STOCKADE_IDLE_TIMEOUT_MS; default 75000: longer than a load
    /// balancer's usual 60 s, so the balancer closes first).
    #[arg(long)]
    pub idle_timeout_ms: Option<u64>,
    /// Most open connections; one more is answered 503 with Retry-After: 1
    /// and closed at once (STOCKADE_MAX_CONNECTIONS; default: the open-file
    /// limit less 128, at most 10000).
    #[arg(long)]
    pub max_connections: Option<u64>,
    /// Most open connections of one client address (an IPv6 client by its
    /// /64); one more is answered 503 too_many_connections and closed,
    /// unless its request carries the admin token. Trusted proxies are not
    /// capped (STOCKADE_MAX_CONNECTIONS_PER_CLIENT; default 256).
    #[arg(long)]
    pub max_connections_per_client: Option<u64>,
    /// The address browsers reach the service at, e.g.
    /// https://shop.example.com (STOCKADE_PUBLIC_URL). With https:// the
    /// dashboard's session cookie is marked Secure; a request header never
    /// decides that.
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// On SIGTERM or Ctrl-C: how long requests in flight get to finish
    /// before every connection is closed; then the writer commits what it
    /// holds and the process exits (STOCKADE_SHUTDOWN_TIMEOUT_MS; default
    /// 10000, longer than the commit deadline).
    #[arg(long)]
    pub shutdown_timeout_ms: Option<u64>,
    /// Log lines as text (coloured on a terminal, plain otherwise; NO_COLOR
    /// turns colour off) or json, one object per line, for log shippers
    /// (STOCKADE_LOG_FORMAT; default text). RUST_LOG picks what is logged.
    #[arg(long)]
    pub log_format: Option<String>,
    /// How long a login to the live dashboard (GET /dashboard) lasts, in
    /// seconds (STOCKADE_DASHBOARD_SESSION_TTL_S; default 28800, 60 to 604800).
    #[arg(long)]
    pub dashboard_session_ttl_s: Option<u64>,
    /// How long the /metrics series of a sale that ended (anything no longer
    /// updated) are kept, in seconds (STOCKADE_METRICS_RETENTION_S; default
    /// 900, 1 to 86400).
    #[arg(long)]
    pub metrics_retention_s: Option<u64>,
    /// How long after its end a sale's engine state (Redis keys) and
    /// waiting room are kept, in seconds; the store keeps its orders
    /// (STOCKADE_ENDED_SALE_RETENTION_S; default 86400, 0 to 2592000).
    #[arg(long)]
    pub ended_sale_retention_s: Option<u64>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;
    use stockade_server::config::settings::SETTINGS;

    use super::Cli;

    #[test]
    fn every_serve_flag_is_a_setting_with_a_variable_and_a_file_key() {
        let command = Cli::command();
        let serve = command.find_subcommand("serve").unwrap();
        let flags: Vec<String> = serve
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|long| *long != "config" && *long != "help")
            .map(|long| format!("--{long}"))
            .collect();
        for flag in &flags {
            let row = SETTINGS
                .iter()
                .find(|s| s.flag == Some(flag.as_str()))
                .unwrap_or_else(|| panic!("{flag} has no row in config::settings::SETTINGS"));
            assert!(row.env.starts_with("STOCKADE_") && !row.key.is_empty());
        }
        for row in SETTINGS {
            if let Some(flag) = row.flag {
                assert!(
                    flags.iter().any(|f| f == flag),
                    "{flag} is documented but not a flag"
                );
            }
        }
    }
}
