//! Logs: colour only on a terminal, JSON on request.

use std::process::{Command, Stdio};

use crate::helpers::{closed_port, command, redis_engine_args, text};

/// Runs `stockade serve` waiting for an unreachable Redis for 300 ms, so
/// that it logs one warning and exits; under a terminal with `script` when
/// `terminal`. Returns what it wrote to stderr (the terminal's output).
fn warning_output(terminal: bool, env: &[(&str, &str)]) -> String {
    let url = format!("redis://127.0.0.1:{}", closed_port());
    let owned = redis_engine_args(&url, 300);
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let output = if terminal {
        let line = std::iter::once(env!("CARGO_BIN_EXE_stockade"))
            .chain(args)
            .collect::<Vec<_>>()
            .join(" ");
        let mut script = Command::new("script");
        script.args(["-q", "-e", "-c", &line, "/dev/null"]);
        for (name, _) in std::env::vars() {
            if name.starts_with("STOCKADE_") || name == "RUST_LOG" || name == "NO_COLOR" {
                script.env_remove(name);
            }
        }
        script.envs(env.iter().copied()).stdin(Stdio::null());
        let output = script
            .output()
            .expect("`script` (util-linux) runs a command on a terminal");
        text(&output.stdout)
    } else {
        text(&command(&args, env).output().unwrap().stderr)
    };
    assert!(output.contains("not reachable yet"), "{output}");
    output
}

#[test]
fn logs_are_coloured_only_on_a_terminal() {
    assert!(
        !warning_output(false, &[]).contains('\u{1b}'),
        "ANSI codes written to a pipe"
    );
    assert!(
        warning_output(true, &[]).contains("\u{1b}["),
        "no colour on a terminal"
    );
    assert!(
        !warning_output(true, &[("NO_COLOR", "1")]).contains('\u{1b}'),
        "colour despite NO_COLOR"
    );
}

#[test]
fn json_logs_are_one_object_per_line() {
    let output = warning_output(false, &[("STOCKADE_LOG_FORMAT", "json")]);
    let mut logged = 0;
    for line in output.lines().filter(|l| !l.starts_with("error:")) {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        assert!(object["level"].is_string(), "{line}");
        assert!(object["fields"]["message"].is_string(), "{line}");
        logged += 1;
    }
    assert!(logged >= 1, "{output}");
}
