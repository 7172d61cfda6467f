//! The command-line grammar.

use clap::{Args, Parser, Subcommand};
use stockade_bench::backend::EngineKind;

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
    /// Simulate a flash sale: N buyers with distinct ids arrive at once for S
    /// items; print what happened and check that nothing was oversold.
    Demo(DemoArgs),
}

/// `stockade demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How many buyers arrive (each asks for one item).
    #[arg(long, default_value_t = 10_000)]
    pub buyers: usize,
    /// How many items are on sale.
    #[arg(long, default_value_t = 1_000)]
    pub stock: u32,
    /// How many buyers are in flight at once (default: all of them).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Which engine decides the purchases: memory, redis or postgres.
    #[arg(long, default_value = "memory", value_parser = parse_engine)]
    pub engine: EngineKind,
    /// Redis to use with --engine redis (default: start a throwaway
    /// redis-server).
    #[arg(long, env = "STOCKADE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// PostgreSQL to use with --engine postgres (default: start a throwaway
    /// server).
    #[arg(long, env = "STOCKADE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Print the result as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn parse_engine(value: &str) -> Result<EngineKind, String> {
    value.parse()
}
