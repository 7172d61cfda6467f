//! Podman as this test drives it: the configuration `scripts/test-container`
//! wrote under the target directory, the image it built, and containers of
//! that image on the host network that are removed (with their volumes)
//! when dropped.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The label of every container this test starts; `scripts/test-container`
/// removes any a killed run left behind.
pub const LABEL: &str = "stockade-test=container";

/// How to make the image and the configuration this test needs.
const HOW: &str = "run `scripts/test-container --build-only`, which installs podman, runc and \
                   mmdebstrap when missing, writes the configuration and builds the image \
                   (scripts/test does it before the suite)";

/// Where `scripts/test-container` keeps podman's configuration and storage.
fn containers_dir() -> PathBuf {
    // CARGO_TARGET_TMPDIR is `<target dir>/tmp`.
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("containers")
}

/// The variables that point podman at the test's configuration, unless
/// the environment already names one.
pub fn configuration() -> Vec<(&'static str, PathBuf)> {
    let dir = containers_dir();
    [
        ("CONTAINERS_CONF", "containers.conf"),
        ("CONTAINERS_STORAGE_CONF", "storage.conf"),
    ]
    .into_iter()
    .filter(|(variable, _)| std::env::var_os(variable).is_none())
    .map(|(variable, file)| (variable, dir.join(file)))
    .collect()
}

/// `program` (podman, or a shell running it) with that configuration.
fn command(program: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command
        .envs(configuration())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

/// Runs `podman ARGS`; its stdout, or what went wrong.
pub async fn run(args: &[&str]) -> Result<String, String> {
    let output = command("podman")
        .args(args)
        .output()
        .await
        .map_err(|e| format!("podman {}: cannot run podman: {e}", args.join(" ")))?;
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "podman {} failed ({}): {} {stdout}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim(),
        ))
    }
}

/// The image under test (`STOCKADE_CONTAINER_IMAGE`, by default the one
/// `scripts/test-container` builds). Panics with what to install or run if
/// podman, its configuration or the image is missing: never skipped.
pub async fn image() -> String {
    let image = std::env::var("STOCKADE_CONTAINER_IMAGE")
        .unwrap_or_else(|_| "localhost/stockade:test".to_owned());
    match tokio::process::Command::new("podman")
        .arg("--version")
        .output()
        .await
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!("podman is not installed: apt-get install podman runc mmdebstrap; then {HOW}")
        }
        Err(e) => panic!("podman --version: {e}"),
        Ok(_) => {}
    }
    let conf = containers_dir().join("containers.conf");
    assert!(
        std::env::var_os("CONTAINERS_CONF").is_some() || conf.exists(),
        "no podman configuration at {}: {HOW}",
        conf.display()
    );
    match run(&["image", "exists", &image]).await {
        Ok(_) => {}
        // `image exists` answers 1 for "no such image", 125 for a podman
        // that does not work (a missing runtime, a bad configuration).
        Err(e) if e.contains("(exit status: 1)") => {
            panic!("the image {image} is not built: {HOW}")
        }
        Err(e) => panic!("podman does not work here: {e}\n(it needs runc: {HOW})"),
    }
    image
}

/// A port for a container on the host network, below the kernel's
/// ephemeral range: the throwaway servers and clients of other tests bind
/// port 0 and so never take it, even while a stopped container is away.
pub fn free_port() -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let span = u64::from(low.saturating_sub(10_000)).max(1);
    for _ in 0..1_000 {
        let port = 10_000 + (random() % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between 10000 and {low}");
}

fn random() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now())
}

/// A running container of the image, `--network host`, `--read-only`,
/// listening on 127.0.0.1:`port` (set by `STOCKADE_LISTEN`, which the
/// image's health check reads).
#[derive(Debug)]
pub struct Container {
    name: String,
    port: u16,
}

impl Container {
    /// `podman run -d` of `image` named `name` with `env`.
    pub async fn run(image: &str, name: &str, env: &[(&str, String)]) -> Self {
        let port = free_port();
        let listen = format!("STOCKADE_LISTEN=127.0.0.1:{port}");
        let mut args = vec![
            "run",
            "--detach",
            "--name",
            name,
            "--label",
            LABEL,
            "--network",
            "host",
            "--read-only",
            // Above the shutdown timeout plus the last commit (the default
            // 10 s equals the shutdown timeout).
            "--stop-timeout",
            "30",
            "--env",
            &listen,
        ];
        let pairs: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        for pair in &pairs {
            args.extend(["--env", pair]);
        }
        args.push(image);
        let container = Self {
            name: name.to_owned(),
            port,
        };
        if let Err(e) = run(&args).await {
            panic!(
                "podman cannot start a container here: {e}\n(it needs runc: apt-get install \
                 runc; and the configuration scripts/test-container writes: {HOW})"
            );
        }
        container
    }

    /// The container's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its base URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `podman exec NAME ARGS`.
    pub async fn exec(&self, args: &[&str]) -> Result<String, String> {
        let mut all = vec!["exec", self.name.as_str()];
        all.extend(args);
        run(&all).await
    }

    /// `podman inspect --format FORMAT NAME`.
    pub async fn inspect(&self, format: &str) -> String {
        run(&["inspect", "--format", format, &self.name])
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// The last `lines` lines of its output, stdout and stderr in order
    /// (all its runs).
    pub async fn logs(&self, lines: usize) -> String {
        // `podman logs` replays the container's stderr on its own stderr:
        // one pipe for both keeps the order.
        let logs = format!("exec podman logs --tail {lines} {} 2>&1", self.name);
        match command("sh").args(["-c", &logs]).output().await {
            Ok(output) => String::from_utf8_lossy(&output.stdout).trim().to_owned(),
            Err(e) => format!("podman logs {}: {e}", self.name),
        }
    }

    /// Waits until `/readyz` answers 200; Err with the log's end if the
    /// container stops or `timeout` passes first.
    pub async fn wait_ready(
        &self,
        client: &reqwest::Client,
        timeout: Duration,
    ) -> Result<(), String> {
        let started = Instant::now();
        loop {
            let url = format!("{}/readyz", self.url());
            if let Ok(response) = client.get(&url).send().await
                && response.status() == 200
            {
                return Ok(());
            }
            let state = self.inspect("{{.State.Status}}").await;
            if state != "running" || started.elapsed() > timeout {
                return Err(format!(
                    "container {} ({state}) not ready on {url} within {} s; its log ends with:\n{}",
                    self.name,
                    timeout.as_secs(),
                    self.logs(30).await
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `podman stop` (the image's stop signal, SIGKILL after the 30 s stop
    /// timeout); returns the exit code and how long the stop took.
    pub async fn stop(&self) -> (i32, Duration) {
        let started = Instant::now();
        if let Err(e) = run(&["stop", &self.name]).await {
            panic!("stopping {}: {e}", self.name);
        }
        let took = started.elapsed();
        let code = self.inspect("{{.State.ExitCode}}").await;
        let code = code
            .parse()
            .unwrap_or_else(|_| panic!("exit code of {}: {code:?}", self.name));
        (code, took)
    }

    /// `podman start` of the stopped container: same port, same volume.
    pub async fn start_again(&self) {
        if let Err(e) = run(&["start", &self.name]).await {
            panic!("starting {} again: {e}", self.name);
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // Blocking, and best effort: scripts/test-container removes what a
        // killed test process leaves.
        let _ = std::process::Command::new("podman")
            .envs(configuration())
            .args(["rm", "--force", "--volumes", "--time", "0", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
