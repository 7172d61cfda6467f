//! Ctrl-C and SIGTERM, caught from the moment they are asked for.
//!
//! `tokio::signal::ctrl_c()` installs its handler only when first polled,
//! so a signal that arrives before that (a child started, a line printed,
//! no await yet) kills the process with the default action instead of
//! stopping it gracefully. These handlers are installed when called.

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};

/// Catches SIGTERM and SIGINT from now on and returns a future that
/// completes on the first of them.
pub fn stop_requested() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    let mut terminate = signal(SignalKind::terminate()).context("catching SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("catching SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    })
}
