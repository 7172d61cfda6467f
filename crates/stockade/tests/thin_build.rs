//! The product build: `cargo install stockade` (the default features, or
//! `--no-default-features`) gives `stockade serve` without the benchmark
//! tool, its throwaway servers and test support; `--features bench` adds
//! them. These tests read the
//! dependency graph cargo would build (`cargo tree`) and fail if the thin
//! build links a benchmark-only crate again, or stops reusing what the
//! tests' build compiled.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Crates only `stockade bench`, `load` and `demo` need: the strategy
/// comparison (`deadpool`, `rslock`), its charts (`plotters`), its
/// histograms, progress bars and HTTP clients, and the throwaway servers.
/// (hdrhistogram is not among them: the dashboard's latency percentiles
/// use it.)
const BENCH_ONLY: [&str; 9] = [
    "rslock",
    "plotters",
    "deadpool",
    "indicatif",
    "reqwest",
    "stockade-bench",
    "stockade-client",
    "stockade-lock-bench",
    "stockade-test-support",
];

/// `cargo tree` with `args`, one package a line (no tree prefix), from
/// the lock file alone.
fn cargo_tree(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["tree", "--prefix", "none", "--locked", "--offline"])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo tree");
    assert!(
        output.status.success(),
        "cargo tree {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The names of the crates the `stockade` package links (normal
/// dependencies only, this platform) with `features` cargo flags.
fn linked_crates(features: &[&str]) -> BTreeSet<String> {
    let args = [
        &[
            "--package",
            "stockade",
            "--edges",
            "normal",
            "--format",
            "{p}",
        ],
        features,
    ]
    .concat();
    cargo_tree(&args)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The features each package is built with (`name vX.Y.Z` to its feature
/// lists: one for the target, another if built for the host differently)
/// in the build `args` selects.
fn built_features(args: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
    let args = [args, &["--format", "{p} [{f}]"]].concat();
    let mut built: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in cargo_tree(&args).lines() {
        // `name v1.2.3 (path or proc-macro) [f1,f2]`, with ` (*)` after
        // a package already shown.
        let line = line.trim().trim_end_matches("(*)").trim_end();
        let (Some(open), Some(features)) = (line.rfind(" ["), line.strip_suffix(']')) else {
            continue;
        };
        let package: Vec<&str> = line[..open].split_whitespace().take(2).collect();
        built
            .entry(package.join(" "))
            .or_default()
            .insert(features[open + 2..].to_owned());
    }
    built
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

#[test]
fn the_product_build_reuses_what_the_tests_build_compiled() {
    // scripts/test builds every test, then the product binary: a
    // dependency the product build resolves with other features than the
    // tests' build is compiled a second time, and everything above it
    // (once ~80 crates, 146 s). The workspace-hack crate (cargo-hakari)
    // and the features the service turns on for workspace crates keep
    // the two alike; only the `stockade` package differs (`bench`). A
    // package built for the host with other features than for the target
    // has two feature lists: each of the product build's must be one of
    // the tests' build's.
    let product = built_features(&["--package", "stockade", "--edges", "normal,build"]);
    let tests = built_features(&[
        "--workspace",
        "--features",
        "stockade/bench",
        "--edges",
        "normal,build,dev",
    ]);
    assert!(
        product.keys().any(|p| p.starts_with("stockade-server ")),
        "cargo tree's lines were not read: {product:?}"
    );
    let differ: Vec<String> = product
        .iter()
        .filter(|(package, _)| !package.starts_with("stockade v"))
        .filter_map(|(package, features)| {
            let in_tests = tests.get(package).cloned().unwrap_or_default();
            let again: Vec<&String> = features.difference(&in_tests).collect();
            let listed = |sets: Vec<&String>| {
                let sets: Vec<String> = sets.into_iter().map(|set| format!("[{set}]")).collect();
                sets.join(" or ")
            };
            (!again.is_empty()).then(|| {
                format!(
                    "{package}: product build {}; tests' build {}",
                    listed(again),
                    listed(in_tests.iter().collect())
                )
            })
        })
        .collect();
    assert!(
        differ.is_empty(),
        "the product build (`cargo build -p stockade`) resolves these packages with other \
         features than the tests' build (`cargo nextest run --workspace --features \
         stockade/bench`), so it compiles them again:\n  {}\n\
         Regenerate the workspace-hack crate: `cargo hakari generate && cargo hakari \
         manage-deps` (`cargo install --locked cargo-hakari`); for a workspace crate, turn \
         its feature on where the service depends on it.",
        differ.join("\n  ")
    );
}
