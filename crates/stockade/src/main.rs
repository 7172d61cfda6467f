//! `stockade`: the command-line entry point. A thin shell: it parses the
//! command line into validated settings and calls the libraries.
//!
//! # Layout
//! - `cli`: the command-line grammar (clap).
//! - `serve`: `stockade serve`, the HTTP service.
//! - `demo`: `stockade demo`, a simulated flash sale.
//! - `bench`: `stockade bench`, every strategy side by side.
//! - `load`: `stockade load`, the same measures over HTTP.
//! - `signals`: Ctrl-C and SIGTERM, caught before any child starts.
//! - `sim`: `stockade sim`, the deterministic simulator.
//! - `doc_commands` (tests): every `stockade serve` command of the docs
//!   resolves.
//! - `doc_links` (tests): the docs and comments cite only files that
//!   exist.
//!
//! `demo`, `bench` and `load` need the cargo feature `bench` (off by
//! default); without it the binary is the product build, `serve` only,
//! linking none of the benchmark tool's dependencies (nor test support).

#[cfg(feature = "bench")]
mod bench;
mod cli;
#[cfg(feature = "bench")]
mod demo;
#[cfg(test)]
mod doc_commands;
#[cfg(test)]
mod doc_links;
#[cfg(feature = "bench")]
mod load;
mod serve;
mod signals;
#[cfg(feature = "bench")]
mod sim;

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
    #[cfg(not(feature = "bench"))]
    if let Some(command) = std::env::args()
        .nth(1)
        .filter(|c| matches!(c.as_str(), "bench" | "load" | "demo" | "sim"))
    {
        eprintln!(
            "error: `stockade {command}` is not in this build of stockade, the product one \
             built without the `bench` feature; run it with \
             `cargo run --release --features bench -- {command}` or install the tool with \
             `cargo install stockade --features bench` to get bench, load, demo and sim"
        );
        return std::process::ExitCode::from(2);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve::run(*args).await,
        #[cfg(feature = "bench")]
        Command::Demo(args) => demo::run(args).await,
        #[cfg(feature = "bench")]
        Command::Bench(args) => bench::run(args).await,
        #[cfg(feature = "bench")]
        Command::Load(args) => load::run(args).await,
        #[cfg(feature = "bench")]
        Command::Sim(args) => sim::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            // Each cause once, even where a message already quotes its cause.
            eprintln!("error: {}", stockade_core::redact::one_line(error.as_ref()));
            std::process::ExitCode::from(2)
        }
    }
}
