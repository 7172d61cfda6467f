//! `stockade`: the command-line entry point. A thin shell: it parses the
//! command line into validated settings and calls the libraries.
//!
//! # Layout
//! - `cli`: the command-line grammar (clap).
//! - `serve`: `stockade serve`, the HTTP service.
//! - `demo`: `stockade demo`, a simulated flash sale.
//! - `bench`: `stockade bench`, every strategy side by side.
//! - `load`: `stockade load`, the same measures over HTTP.

mod bench;
mod cli;
mod demo;
mod load;
mod serve;

use clap::Parser;

use cli::{Cli, Command};

/// mimalloc instead of the system allocator: a purchase allocates and frees
/// many small buffers (HTTP, JSON, the batch of its commit) across threads,
/// and glibc malloc was a seventh of the service's CPU in a `perf` profile
/// of `stockade bench http`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Load(args) => load::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            // Each cause once, even where a message already quotes its cause.
            eprintln!(
                "error: {}",
                stockade_server::redact::one_line(error.as_ref())
            );
            std::process::ExitCode::from(2)
        }
    }
}
