//! `stockade`: the command-line entry point. A thin shell: it parses the
//! command line into validated settings and calls the libraries.
//!
//! # Layout
//! - `cli`: the command-line grammar (clap).
//! - `demo`: `stockade demo`, a simulated flash sale.
//! - `bench`: `stockade bench`, every strategy side by side.

mod bench;
mod cli;
mod demo;

use clap::Parser;

use cli::{Cli, Command};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args).await,
        Command::Bench(args) => bench::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::from(2)
        }
    }
}
