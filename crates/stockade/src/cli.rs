//! The command-line grammar.

#[cfg(feature = "bench")]
use std::path::PathBuf;
#[cfg(feature = "bench")]
use std::time::Duration;

#[cfg(feature = "bench")]
pub use crate::sim::SimArgs;
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
    #[cfg(feature = "bench")]
    /// Run the deterministic simulator: the real service on simulated time,
    /// a crowd and faults drawn from each seed, every promise of the README
    /// checked. A failing seed prints the one command that replays it.
    Sim(SimArgs),
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
    /// Split the stock over this many SKUs (sizes size-1 … size-N, 1 to
    /// 100), each buyer asking for one of them.
    #[arg(long, default_value_t = 1)]
    pub skus: u32,
    /// Run a draw sale instead of a race: the buyers enter during a short
    /// window, the service draws the winners when it closes, and the draw
    /// is checked from what it publishes (the seed against its commitment,
    /// the order recomputed). Over HTTP only.
    #[arg(long)]
    pub draw: bool,
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
    /// and their PostgreSQL pools; stockade-postgres runs on the order
    /// store's own pool of 16).
    #[arg(long, default_value_t = 32)]
    pub pool_size: u32,
    /// Redis to use (default: start a throwaway redis-server). On a named
    /// server the bench writes only keys under `stockade-bench:`.
    #[arg(long, env = "STOCKADE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// PostgreSQL database to use (default: start a throwaway server with
    /// fsync on). On a named database the bench creates its own
    /// `stockade_bench_*` tables, and stockade-postgres the order store's
    /// tables (`sales`, `orders`, ...): name a database of its own.
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
    /// One hot sale on a throwaway three-primary Redis Cluster, whole and
    /// spread over shards, with the same crowd: the busiest primary's CPU
    /// and script time per purchase, and purchases per second.
    Shards(ShardsArgs),
    /// `stockade serve` over HTTP against a bare axum handler that parses
    /// and echoes the purchase, with the same keep-alive crowd: committed
    /// purchases, then sold-out rejections, each target's figures next to
    /// the baseline's from the run just before, and the ratio.
    Http(HttpArgs),
    /// The bare handler `stockade bench http` compares with (it starts this
    /// itself, as a child process).
    #[command(hide = true)]
    HttpBaseline(HttpBaselineArgs),
    /// A large draw on the embedded default: its entries loaded at once,
    /// then the seconds from their close to the published draw, median and
    /// range of the runs.
    Draw(crate::bench::draw::DrawArgs),
    /// Throwaway Redis and PostgreSQL servers for a measuring script
    /// (scripts/capacity): started, described as one JSON line on stdout,
    /// and stopped when stdin closes, on Ctrl-C or on SIGTERM.
    Servers(ServersArgs),
}

#[cfg(feature = "bench")]
/// `stockade bench servers`.
#[derive(Debug, Args)]
pub struct ServersArgs {
    /// Which Redis to start: none, single (one redis-server) or cluster
    /// (three primaries joined by `redis-cli --cluster create`).
    #[arg(long, value_enum, default_value_t = RedisShape::Cluster)]
    pub redis: RedisShape,
    /// Start a durable PostgreSQL (fsync on) too, with one fresh database.
    #[arg(long)]
    pub postgres: bool,
}

#[cfg(feature = "bench")]
/// The Redis `stockade bench servers` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RedisShape {
    /// No Redis.
    None,
    /// One redis-server.
    Single,
    /// A three-primary Redis Cluster.
    Cluster,
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
/// `stockade bench shards`.
#[derive(Debug, Args)]
pub struct ShardsArgs {
    /// Buyers per sale, one item each (the stock is the same).
    #[arg(long, default_value_t = 50_000)]
    pub buyers: usize,
    /// Purchases in flight at once.
    #[arg(long, default_value_t = 512)]
    pub concurrency: usize,
    /// Shards of the spread sale (2 to 64).
    #[arg(long, default_value_t = 3)]
    pub shards: u16,
    /// Rounds, each selling a whole and a spread sale.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Purchases per second offered to both sales alike, to compare them
    /// at the same load (default: as fast as each answers).
    #[arg(long)]
    pub rate: Option<u32>,
    /// Print the results as one JSON object.
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
    /// Split the stock over this many SKUs (1 to 100), each buyer asking
    /// for one of them (the stockade-* strategies only; default 1).
    #[arg(long)]
    pub skus: Option<u32>,
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
            skus: self.skus,
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

/// `stockade serve`. Every setting is read from its flag, then its
/// `STOCKADE_*` variable, then the `--config` file, then its default; the
/// admin token and the admission secret have no flag (it would show in
/// `ps`). The settings are declared once, in `stockade_server::config`:
/// their flags and the table after them in `--help` come from there.
#[derive(Debug, Args)]
#[command(after_help = stockade_server::config::settings::help_table())]
pub struct ServeArgs {
    /// A TOML file with the same settings, under the keys of the table below
    /// (e.g. commit_deadline_ms = 3000).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// The settings, the flags' and the variables' apart.
    #[command(flatten)]
    pub settings: stockade_server::config::CommandLineSettings,
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
            .filter(|a| !a.is_hide_set())
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
        for row in SETTINGS.iter() {
            if let Some(flag) = row.flag {
                assert!(
                    flags.iter().any(|f| f == flag),
                    "{flag} is documented but not a flag"
                );
            }
        }
    }
}
