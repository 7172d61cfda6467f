//! Settings: named the way they were given, flags over variables over the
//! file, and `--help` listing every one.

use stockade_server::config::settings::SETTINGS;

use crate::helpers::{Env, run, text};

#[test]
fn a_setting_is_named_the_way_it_was_given() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stockade.toml");
    std::fs::write(&file, "commit_deadline_ms = 0\n").unwrap();
    let file = file.to_str().unwrap();
    let cases: [(&[&str], Env, String); 3] = [
        (
            &["serve"],
            &[("STOCKADE_COMMIT_DEADLINE_MS", "0")],
            "STOCKADE_COMMIT_DEADLINE_MS".to_owned(),
        ),
        (
            &["serve", "--commit-deadline-ms", "0"],
            &[],
            "--commit-deadline-ms".to_owned(),
        ),
        (
            &["serve", "--config", file],
            &[],
            format!("commit_deadline_ms in {file}"),
        ),
    ];
    for (args, env, name) in cases {
        let (output, _) = run(args, env);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: invalid setting {name}: ")),
            "{args:?} {env:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
    }
}

/// Flags win over variables, variables over the file: the bad value of the
/// winning layer is the one named, whatever the others say.
#[test]
fn a_flag_beats_its_variable_which_beats_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stockade.toml");
    std::fs::write(&file, "commit_deadline_ms = 3000\n").unwrap();
    let file = file.to_str().unwrap();
    let cases: [(&[&str], Env, &str); 2] = [
        (
            &["serve", "--config", file, "--commit-deadline-ms", "0"],
            &[("STOCKADE_COMMIT_DEADLINE_MS", "3000")],
            "--commit-deadline-ms",
        ),
        (
            &["serve", "--config", file],
            &[("STOCKADE_COMMIT_DEADLINE_MS", "0")],
            "STOCKADE_COMMIT_DEADLINE_MS",
        ),
    ];
    for (args, env, name) in cases {
        let (output, _) = run(args, env);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.starts_with(&format!("error: invalid setting {name}: ")),
            "{args:?} {env:?}: {stderr}"
        );
    }
}

/// A variable clap reads is named by the variable; the admin token is no
/// flag (it would show in `ps`).
#[test]
fn a_bad_variable_is_named_by_it_and_the_admin_token_is_no_flag() {
    let (output, _) = run(&["serve"], &[("STOCKADE_BATCH_MAX", "lots")]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(
            "error: invalid setting STOCKADE_BATCH_MAX: \"lots\" is not a whole number"
        ),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let (output, _) = run(&["serve", "--admin-token", "0123456789abcdef"], &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: invalid setting --admin-token: is not a flag"),
        "{stderr}"
    );
    assert!(stderr.contains("STOCKADE_ADMIN_TOKEN"), "{stderr}");
}

#[test]
fn help_lists_every_setting_with_its_variable_and_file_key() {
    let (output, _) = run(&["serve", "--help"], &[]);
    let help = text(&output.stdout);
    assert!(output.status.success(), "{help}");
    for row in SETTINGS.iter() {
        assert!(help.contains(row.env), "{} missing from --help", row.env);
        assert!(
            help.lines()
                .any(|l| l.contains(row.env) && l.contains(row.key)),
            "{} missing from --help's table",
            row.key
        );
        if let Some(flag) = row.flag {
            assert!(help.contains(flag), "{flag} missing from --help");
        }
    }
    for needed in [
        "STOCKADE_ADMIN_TOKEN",
        "STOCKADE_OUTBOX_GRACE_MS",
        "admin_token",
        "outbox_grace_ms",
    ] {
        assert!(help.contains(needed), "{needed} missing from --help");
    }
}
