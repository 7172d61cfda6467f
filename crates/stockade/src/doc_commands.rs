//! Every `stockade serve` command line of README.md and docs/*.md, parsed
//! by the binary's own grammar and resolved into settings as `stockade
//! serve` resolves them, so a command in the docs cannot rot: a flag
//! renamed, a combination refused, a value out of bounds fails here, named
//! by its file and line.
//!
//! Commands are the lines of fenced code blocks (continued with `\`) and the
//! inline code spans that run `stockade serve` (or `cargo run … -- serve`).
//! `VAR=value` before the command are its variables; `$(…)` and the
//! variables in [`SHELL`] stand for their sample values; a `_FILE` setting's
//! path becomes a file holding a sample secret of its kind. No command may
//! put a secret on its command line, where `ps` shows it: a URL with a
//! password, or a secret flag ([`SECRET_FLAGS`]); the docs use the
//! variables or the `_FILE` forms.

use std::path::{Path, PathBuf};

use clap::Parser;
use stockade_server::config::{RawConfig, ServerConfig};

use crate::cli::{Cli, Command};

/// The shell variables the docs' commands use, with sample values.
const SHELL: &[(&str, &str)] = &[
    ("TOKEN", "0123456789abcdef0123456789abcdef"),
    ("port", "8081"),
];

/// A sample secret for `$(…)`: what `openssl rand -hex 24` prints.
const SAMPLE_SECRET: &str = "00112233445566778899aabbccddeeff0011223344556677";

/// A command of the docs: where it is, its variables and its arguments.
#[derive(Debug)]
struct DocCommand {
    at: String,
    env: Vec<(String, String)>,
    args: Vec<String>,
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every docs/*.md.
fn documents() -> Vec<PathBuf> {
    let root = repository();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, root.join("README.md"));
    docs
}

/// The shell lines of `text` (code blocks, `\` continuations joined) and its
/// inline code spans, each with its first line number.
fn shell_lines(text: &str) -> Vec<(usize, String)> {
    let mut lines = Vec::new();
    let mut fenced = false;
    let mut pending: Option<(usize, String)> = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let spans = line.split('`').skip(1).step_by(2);
            lines.extend(spans.map(|span| (number, span.to_owned())));
            continue;
        }
        let (start, mut joined) = pending.take().unwrap_or((number, String::new()));
        match line.trim_end().strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
                pending = Some((start, joined));
            }
            None => {
                joined.push_str(line);
                lines.push((start, joined));
            }
        }
    }
    lines
}

/// `line` with `$(…)` and `$NAME` replaced by sample values; an unknown
/// variable is an error to fix here (add it to [`SHELL`]).
fn expand(line: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = line;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        rest = &rest[dollar + 1..];
        if let Some(inner) = rest.strip_prefix('(') {
            let close = inner.find(')').ok_or("an unclosed $(")?;
            out.push_str(SAMPLE_SECRET);
            rest = &inner[close + 1..];
            continue;
        }
        let braced = rest.starts_with('{');
        let name_start = usize::from(braced);
        let name_len = rest[name_start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len() - name_start);
        let name = &rest[name_start..name_start + name_len];
        let value = SHELL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, value)| *value)
            .ok_or_else(|| format!("${name} has no sample value in doc_commands::SHELL"))?;
        out.push_str(value);
        rest = &rest[name_start + name_len + usize::from(braced)..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where `serve` is in `words`, if they run `stockade serve`.
fn serve_at(words: &[String]) -> Option<usize> {
    (1..words.len()).find(|&i| {
        let before = words[i - 1].as_str();
        words[i] == "serve"
            && (before == "stockade"
                || before.ends_with("/stockade")
                || (before == "--" && words.iter().any(|w| w == "cargo")))
    })
}

/// The `stockade serve` command of a shell line, if it runs one.
fn command(at: String, line: &str) -> Option<Result<DocCommand, String>> {
    serve_at(&shlex::split(line)?)?;
    let words = match expand(line).map(|line| shlex::split(&line)) {
        Ok(Some(words)) => words,
        Ok(None) => return Some(Err("unbalanced quotes".to_owned())),
        Err(reason) => return Some(Err(reason)),
    };
    let serve = serve_at(&words)?;
    let env = words[..serve]
        .iter()
        .filter_map(|word| word.split_once('='))
        .filter(|(name, _)| name.starts_with("STOCKADE_") || name.starts_with("OTEL_"))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect();
    let args = words[serve + 1..]
        .iter()
        .take_while(|word| !matches!(word.as_str(), "&" | ";" | "|" | "&&" | "||"))
        .cloned()
        .collect();
    Some(Ok(DocCommand { at, env, args }))
}

/// Every `stockade serve` command of the docs.
fn doc_commands() -> Vec<Result<DocCommand, String>> {
    let root = repository();
    let mut found = Vec::new();
    for path in documents() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        for (number, line) in shell_lines(&text) {
            let at = format!("{name}:{number}");
            if let Some(command) = command(at.clone(), &line) {
                found.push(command.map_err(|reason| format!("{at}: {reason}")));
            }
        }
    }
    found
}

/// The flags whose value is a secret (the admin token and the admission
/// secret are no flags at all).
const SECRET_FLAGS: &[&str] = &["--payments-token", "--jwt-secret"];

/// The first argument of `args` that puts a secret on the command line: a
/// secret flag, or a URL with a password (in its user part or query).
fn secret_on_the_command_line(args: &[String]) -> Option<&str> {
    args.iter().map(String::as_str).find(|arg| {
        let flag = arg.split('=').next().unwrap_or_default();
        SECRET_FLAGS.contains(&flag)
            || (arg.contains("://") && stockade_core::redact::mask_password(arg) != *arg)
    })
}

/// A file holding a sample secret of the kind `setting` names.
fn sample_file(dir: &Path, setting: &str) -> String {
    let upper = setting.to_ascii_uppercase().replace('-', "_");
    let secret = if upper.contains("DATABASE_URL") {
        "postgres://stockade:sample-password@db/stockade"
    } else if upper.contains("REDIS_URL") {
        "redis://:sample-password@10.0.0.5:6379/"
    } else {
        SAMPLE_SECRET
    };
    let path = dir.join(upper.to_ascii_lowercase());
    std::fs::write(&path, format!("{secret}\n")).unwrap();
    path.display().to_string()
}

/// Resolves one command as `stockade serve` would, or says why it fails.
fn check(command: DocCommand, dir: &Path) -> Result<(), String> {
    let DocCommand { at, env, mut args } = command;
    if let Some(secret) = secret_on_the_command_line(&args) {
        return Err(format!(
            "{at}: `{secret}` puts a secret on the command line, where `ps` shows it: \
             use its variable or its _FILE form"
        ));
    }
    for index in 0..args.len() {
        if args[index].starts_with("--") && args[index].ends_with("-file") && index + 1 < args.len()
        {
            args[index + 1] = sample_file(dir, &args[index]);
        }
    }
    let env: Vec<(String, String)> = env
        .into_iter()
        .map(|(name, value)| match name.ends_with("_FILE") {
            true => {
                let file = sample_file(dir, &name);
                (name, file)
            }
            false => (name, value),
        })
        .collect();
    let argv = ["stockade", "serve"]
        .into_iter()
        .map(str::to_owned)
        .chain(args.iter().cloned());
    let cli = match Cli::try_parse_from(argv) {
        Ok(cli) => cli,
        Err(error) if error.kind() == clap::error::ErrorKind::DisplayHelp => return Ok(()),
        Err(error) => {
            return Err(format!(
                "{at}: `stockade serve {}`: {error}",
                args.join(" ")
            ));
        }
    };
    #[allow(unreachable_patterns)] // `bench`, `load`, `demo` with the feature
    let serve = match cli.command {
        Command::Serve(serve) => serve,
        _ => unreachable!("parsed as serve"),
    };
    let variables = RawConfig::from_env(|name| {
        env.iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.clone())
    })
    .map_err(|error| format!("{at}: {error}"))?;
    ServerConfig::resolve(serve.settings.flags, variables, serve.config.as_deref())
        .map(|_| ())
        .map_err(|error| format!("{at}: `stockade serve {}`: {error}", args.join(" ")))
}

#[test]
fn every_serve_command_in_the_docs_parses_and_resolves() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut checked = 0;
    for command in doc_commands() {
        checked += 1;
        if let Err(failure) = command.and_then(|command| check(command, dir.path())) {
            failures.push(failure);
        }
    }
    // README's Deploy section alone has more: finding fewer means the
    // extraction broke, not that the docs are clean.
    assert!(checked >= 5, "only {checked} commands found in the docs");
    assert!(
        failures.is_empty(),
        "{} of {checked} documented `stockade serve` commands fail:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn shell_lines_join_continuations_and_expand_samples() {
    let text = "x `stockade serve --help` y\n```sh\nA=$(openssl rand) \\\n  stockade serve \\\n  --listen 0.0.0.0:$port &  # note\n```\n";
    let lines = shell_lines(text);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let command = command("t".into(), &lines[1].1).unwrap().unwrap();
    assert_eq!(command.args, ["--listen", "0.0.0.0:8081"], "{command:?}");
    assert!(
        command.env.is_empty(),
        "only STOCKADE_ and OTEL_ variables: {command:?}"
    );
    assert!(expand("$UNKNOWN").is_err());
}

#[test]
fn a_secret_on_a_documented_command_line_is_refused() {
    let args = |line: &str| -> Vec<String> { line.split(' ').map(str::to_owned).collect() };
    for line in [
        "--database-url postgres://stockade:pw@db/stockade",
        "--redis-url=redis://:pw@10.0.0.5:6379/",
        "--database-url postgres://stockade@db/stockade?password=pw",
        "--payments-token 0123456789abcdef0123",
        "--jwt-secret=0123456789abcdef0123456789abcdef",
    ] {
        assert!(secret_on_the_command_line(&args(line)).is_some(), "{line}");
    }
    for line in [
        "--database-url postgres://stockade@db/stockade",
        "--redis-url redis://10.0.0.5:6379/ --database-url-file /run/secrets/database-url",
        "--payments-token-file /run/secrets/payments-token",
    ] {
        assert_eq!(secret_on_the_command_line(&args(line)), None, "{line}");
    }
}
