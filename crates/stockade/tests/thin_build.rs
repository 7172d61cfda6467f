//! The product build: `cargo install stockade` (the default features, or
//! `--no-default-features`) gives `stockade serve` without the benchmark
//! tool, its throwaway servers and test support; `--features bench` adds
//! them. These tests read the
//! dependency graph cargo would build (`cargo tree`) and fail if the thin
//! build links a benchmark-only crate again.

use std::collections::BTreeSet;
use std::process::Command;

/// Crates only `stockade bench`, `load` and `demo` need: the strategy
/// comparison (`deadpool`, `rslock`), its charts (`plotters`), its
/// histograms, progress bars and HTTP client, and the throwaway servers.
/// (hdrhistogram is not among them: the dashboard's latency percentiles
/// use it.)
const BENCH_ONLY: [&str; 8] = [
    "rslock",
    "plotters",
    "deadpool",
    "indicatif",
    "reqwest",
    "stockade-bench",
    "stockade-lock-bench",
    "stockade-test-support",
];

/// The names of the crates the `stockade` package links (normal
/// dependencies only, this platform) with `features` cargo flags.
fn linked_crates(features: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["tree", "--package", "stockade", "--edges", "normal"])
        .args([
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--locked",
            "--offline",
        ])
        .args(features)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo tree");
    assert!(
        output.status.success(),
        "cargo tree {features:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_thin_build_links_no_benchmark_only_crate() {
    let thin = linked_crates(&["--no-default-features"]);
    assert!(
        thin.contains("stockade-server") && thin.contains("redis"),
        "the thin build still serves: {thin:?}"
    );
    let linked: Vec<&str> = BENCH_ONLY
        .into_iter()
        .filter(|name| thin.contains(*name))
        .collect();
    assert!(
        linked.is_empty(),
        "`stockade --no-default-features` links benchmark-only crates {linked:?}; \
         make them optional dependencies of the `bench` feature"
    );
}

#[test]
fn the_default_build_is_the_product_build() {
    // `stockade serve`'s build never links test support or the benchmark
    // tool unless asked for.
    assert_eq!(
        linked_crates(&[]),
        linked_crates(&["--no-default-features"]),
        "the default features link more than the product build: keep `bench` out of `default`"
    );
}

#[test]
fn the_bench_feature_keeps_the_benchmark_tool() {
    // Also proves the names above are real crate names of this workspace:
    // a misspelt one would make the thin-build check pass vacuously.
    let full = linked_crates(&["--features", "bench"]);
    let missing: Vec<&str> = BENCH_ONLY
        .into_iter()
        .filter(|name| !full.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "`--features bench` lacks {missing:?}: `stockade bench`/`load`/`demo` need them"
    );
}
