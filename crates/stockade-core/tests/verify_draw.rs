//! The draw's order computed twice, by `stockade_core::draw` and by
//! `scripts/verify-draw` (Python's standard library, written from the
//! documented algorithm alone): they agree on random seeds and entries,
//! including ids outside ASCII, and the script refuses a seed that does not
//! match its commitment and a list of entries that is not the drawn set.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use stockade_core::draw::{Seed, draw_order, entry_digest};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/verify-draw")
}

fn run_script(args: &[&str], ids: &[String]) -> Output {
    let mut child = Command::new("python3")
        .arg(script())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs scripts/verify-draw (install python3)");
    let mut stdin = child.stdin.take().unwrap();
    for id in ids {
        writeln!(stdin, "{id}").unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn the_script_recomputes_every_draw() {
    for count in [0, 1, 2, 3, 17, 100, 257, 1000] {
        let seed = Seed::random();
        let ids: Vec<String> = (0..count)
            .map(|n| match n % 3 {
                0 => uuid::Uuid::now_v7().to_string(),
                1 => format!("buyer-{n}"),
                _ => format!("käufer-{n}-é"),
            })
            .collect();
        let ours = draw_order(&seed, &ids).unwrap();
        let output = run_script(
            &["--seed", &seed.to_hex(), "--commitment", &seed.commitment()],
            &ids,
        );
        assert!(output.status.success(), "{output:?}");
        let theirs: Vec<String> = String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(theirs, ours, "{count} entries, seed {}", seed.to_hex());
    }
}

#[test]
fn the_script_refuses_a_seed_that_is_not_the_committed_one() {
    let committed = Seed::random();
    let other = Seed::random();
    let output = run_script(
        &[
            "--seed",
            &other.to_hex(),
            "--commitment",
            &committed.commitment(),
        ],
        &["a".to_owned()],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("does not match the commitment"));
    let output = run_script(&["--seed", "xyz"], &[]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("64 hexadecimal digits"));
}

#[test]
fn the_script_checks_the_entries_against_the_published_digest() {
    let seed = Seed::random();
    let ids: Vec<String> = ["b", "a", "käufer-é"].map(str::to_owned).to_vec();
    let digest = entry_digest(&ids);
    let output = run_script(&["--seed", &seed.to_hex(), "--digest", &digest], &ids);
    assert!(output.status.success(), "{output:?}");
    // One entry more (or fewer) than the drawn set: refused.
    let mut more = ids.clone();
    more.push("c".to_owned());
    let output = run_script(&["--seed", &seed.to_hex(), "--digest", &digest], &more);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("not the set that was drawn"));
}
