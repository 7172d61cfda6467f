//! An instance whose wall clock is set ahead, with no test-only code in
//! the service: libfaketime (`LD_PRELOAD`) moves every reading of the
//! process's real-time clock (`SystemTime::now`, the `Date` header, the
//! instance's name, its logs) by a fixed offset, and leaves the monotonic
//! clock alone (`FAKETIME_DONT_FAKE_MONOTONIC`), so tokio's timers and
//! timeouts run at the real pace. `scripts/test` installs it (Debian's
//! `faketime` package); [`ahead`] fails clearly when it is missing.
//!
//! [`clock_offset`] reads the offset back from the instances' `Date`
//! headers, so a test shows its skew is real rather than assuming it.

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::cluster::Cluster;

/// Where Debian and Ubuntu put libfaketime for this machine's architecture.
fn library() -> PathBuf {
    PathBuf::from(format!(
        "/usr/lib/{}-linux-gnu/faketime/libfaketime.so.1",
        std::env::consts::ARCH
    ))
}

/// The variables that start a process with its wall clock `by` ahead.
///
/// # Panics
/// If libfaketime is not installed, saying how to install it.
pub fn ahead(by: Duration) -> Vec<(String, String)> {
    let library = library();
    assert!(
        library.exists(),
        "libfaketime is not installed ({} is missing): the clock-skew test needs it; \
         `apt-get install faketime` (scripts/test installs it)",
        library.display()
    );
    vec![
        ("LD_PRELOAD".into(), library.display().to_string()),
        ("FAKETIME".into(), format!("+{}s", by.as_secs())),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ]
}

/// An answer's `Date` header (whole seconds, the instance's clock).
pub fn date_of(response: &reqwest::Response) -> Option<DateTime<Utc>> {
    let text = response
        .headers()
        .get(reqwest::header::DATE)?
        .to_str()
        .ok()?;
    DateTime::parse_from_rfc2822(text)
        .ok()
        .map(|at| at.with_timezone(&Utc))
}

/// How far instance `other`'s clock is ahead of instance `base`'s, in whole
/// seconds, read from the `Date` headers of `GET /healthz` asked of both at
/// once, on the second's boundary as near as the test can: the median of
/// five readings (each may be one second off by rounding).
pub async fn clock_offset(cluster: &Cluster, base: usize, other: usize) -> i64 {
    let mut offsets = Vec::new();
    for _ in 0..5 {
        let ask = |index: usize| {
            let url = format!("{}/healthz", cluster.endpoints().get(index));
            let client = cluster.client().clone();
            async move {
                let response = client.get(&url).send().await.expect("GET /healthz");
                date_of(&response).expect("a Date header")
            }
        };
        let (a, b) = tokio::join!(ask(base), ask(other));
        offsets.push((b - a).num_seconds());
        tokio::time::sleep(Duration::from_millis(230)).await;
    }
    offsets.sort_unstable();
    offsets[offsets.len() / 2]
}
