//! `deploy/compose.yaml` as the README's Deploy section starts it: its
//! `export` line run by bash as written (the secrets `openssl rand` makes),
//! then its `podman-compose -f deploy/compose.yaml up -d` line as written,
//! from the repository root, naming the services to start. [`Stack`] is
//! that project; dropping it takes it down with its volumes.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::podman;

/// The README's two commands, read from its Deploy section.
pub struct Readme {
    /// `export STOCKADE_ADMIN_TOKEN=$(openssl rand …) …` (one line,
    /// continuations joined).
    pub export: String,
    /// `podman-compose -f deploy/compose.yaml up -d`, its comment dropped.
    pub up: String,
}

/// The repository's root, where the README's commands run.
pub fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

impl Readme {
    /// The commands of the Deploy section's code block that starts the
    /// compose file; panics naming what is missing.
    pub fn read() -> Self {
        let text = std::fs::read_to_string(repository().join("README.md")).expect("README.md");
        let section = text
            .split("\n## ")
            .find(|s| s.starts_with("Deploy\n"))
            .expect("README.md has a \"## Deploy\" section");
        let block = section
            .split("```")
            .skip(1)
            .step_by(2)
            .find(|b| b.contains("deploy/compose.yaml up -d"))
            .expect("the Deploy section has a code block with `… -f deploy/compose.yaml up -d`");
        // Shell lines: continuations joined, comments dropped.
        let lines: Vec<String> = block
            .replace("\\\n", " ")
            .lines()
            .map(|l| l.split(" #").next().unwrap_or("").trim().to_owned())
            .collect();
        let find = |start: &str| {
            lines
                .iter()
                .find(|l| l.starts_with(start))
                .cloned()
                .unwrap_or_else(|| {
                    panic!("the README's compose block has no line starting `{start}`:\n{block}")
                })
        };
        Self {
            export: find("export "),
            up: find("podman-compose -f deploy/compose.yaml up -d"),
        }
    }

    /// The names the `export` line sets (`NAME=…`), in its order.
    fn exported(&self) -> Vec<String> {
        self.export
            .split_whitespace()
            .skip(1)
            .filter_map(|word| word.split_once('=').map(|(name, _)| name.to_owned()))
            .collect()
    }

    /// Runs the `export` line in bash: the secrets it set, by name.
    pub fn secrets(&self) -> Vec<(String, String)> {
        let names = self.exported();
        let print: Vec<String> = names.iter().map(|s| format!("\"${s}\"")).collect();
        let script = format!(
            "set -euo pipefail\n{}\nprintf '%s\\n' {}",
            self.export,
            print.join(" ")
        );
        let output = std::process::Command::new("bash")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .output()
            .expect("bash");
        assert!(
            output.status.success(),
            "the README's export line failed ({}): {}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            self.export
        );
        let values: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(values.len(), names.len(), "{}", self.export);
        for (name, value) in names.iter().zip(&values) {
            assert!(
                value.len() >= 32,
                "the README's export line sets {name} to {} characters: {}",
                value.len(),
                self.export
            );
        }
        names.into_iter().zip(values).collect()
    }
}

/// podman-compose from the virtualenv `scripts/validate-deploy` makes.
fn podman_compose_dir() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("deploy-venv/bin");
    assert!(
        bin.join("podman-compose").exists(),
        "no podman-compose in {}: run scripts/validate-deploy, which installs it \
         (scripts/test does it before the suite)",
        bin.display()
    );
    bin
}

/// A compose project of the repository's file, named
/// `stockade-compose-test-PID` (`scripts/test-container` removes those of
/// test processes that were killed).
pub struct Stack {
    pub name: String,
    secrets: Vec<(String, String)>,
}

impl Stack {
    /// Runs the README's `up` line with `services` appended.
    pub fn up(readme: &Readme, secrets: Vec<(String, String)>, services: &[&str]) -> Self {
        let stack = Self {
            name: format!("stockade-compose-test-{}", std::process::id()),
            secrets,
        };
        let script = format!("set -euo pipefail\n{} {}", readme.up, services.join(" "));
        let output = stack
            .shell(&script)
            .output()
            .expect("bash running podman-compose");
        if !output.status.success() {
            panic!(
                "`{} {}` failed ({}):\n{}\n{}",
                readme.up,
                services.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        stack
    }

    /// `bash -c SCRIPT` in the repository root, podman-compose on the PATH,
    /// the secrets, the project's name and podman's test configuration.
    fn shell(&self, script: &str) -> std::process::Command {
        let path = format!(
            "{}:{}",
            podman_compose_dir().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = std::process::Command::new("bash");
        command
            .args(["-c", script])
            .current_dir(repository())
            .env("PATH", path)
            .env("COMPOSE_PROJECT_NAME", &self.name)
            .envs(self.secrets.iter().map(|(k, v)| (k, v)))
            .envs(podman::configuration())
            .stdin(Stdio::null());
        command
    }

    /// The secret `name` the README's export line set.
    pub fn secret(&self, name: &str) -> &str {
        &self.secrets.iter().find(|(k, _)| k == name).expect(name).1
    }

    /// The name of the container podman-compose made for `service`.
    pub async fn container(&self, service: &str) -> String {
        let project = format!("label=io.podman.compose.project={}", self.name);
        let service_label = format!("label=com.docker.compose.service={service}");
        let names = podman::run(&[
            "ps",
            "--all",
            "--filter",
            &project,
            "--filter",
            &service_label,
            "--format",
            "{{.Names}}",
        ])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        match names.lines().collect::<Vec<_>>()[..] {
            [name] => name.to_owned(),
            ref other => panic!("podman-compose made no single container for {service}: {other:?}"),
        }
    }

    /// Every container's state and the last `lines` of its log (without
    /// the trace exporter's complaints: Jaeger is not started here): what
    /// a failure message shows.
    pub fn describe(&self, lines: usize) -> String {
        let script = format!(
            "podman ps -a --filter label=io.podman.compose.project={0} \
               --format '{{{{.Names}}}} {{{{.Status}}}}'
             for c in $(podman ps -a -q --filter label=io.podman.compose.project={0}); do
               echo \"--- $(podman inspect --format '{{{{.Name}}}}' $c)\"
               podman logs $c 2>&1 | grep -v '\"target\":\"opentelemetry' | tail -n {lines}
             done",
            self.name
        );
        match self.shell(&script).output() {
            Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
            Err(e) => format!("podman ps: {e}"),
        }
    }
}

impl Drop for Stack {
    /// `down`, then whatever it left (a failed test's `down` has been seen
    /// leaving the network, whose fixed subnet the next run then cannot
    /// create): the project's containers, network and volumes by label.
    fn drop(&mut self) {
        let script = format!(
            "podman-compose -f deploy/compose.yaml down --volumes --timeout 0
             label=io.podman.compose.project={0}
             podman ps -a -q --filter \"$label\" | xargs -r podman rm -f -v -t 0
             podman network rm -f {0}_stockade
             podman volume ls -q --filter \"$label\" | xargs -r podman volume rm -f",
            self.name
        );
        let _ = self
            .shell(&script)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
