//! `deploy/compose.yaml`'s three Stockade services, started by podman-compose
//! from the file as it is: the image, the read-only root with its tmpfs, the
//! data volumes, the stop signal and grace period, the health check and
//! every `STOCKADE_*` variable. HAProxy, Redis, PostgreSQL, Prometheus and
//! Grafana use official images that cannot be pulled here, so the services
//! run with `--no-deps` and an override file (written by this test, merged
//! by compose's own `-f a -f b` rules) changes only what pulling them would
//! have given:
//!
//! - the image is the one `scripts/test-container` built;
//! - the host network instead of the compose network, each service on a
//!   port of its own, and the health check asked on that port;
//! - Redis and PostgreSQL are the suite's throwaway servers.
//!
//! The three services sell a sale out (exactly the stock, each buyer once),
//! every health check passes, and `podman-compose stop` ends a service
//! gracefully (exit 0 within the grace period).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use stockade_test_support::{PostgresServer, RedisServer};

use crate::api::{ADMISSION_SECRET, DRAW_KEY, PAYMENTS_TOKEN, TOKEN};
use crate::podman;

/// The compose file's Stockade services.
const SERVICES: [&str; 3] = ["stockade1", "stockade2", "stockade3"];
/// How long a service may take to answer `/readyz` 200.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// Items on sale, and buyers (each wants one).
const STOCK: usize = 40;
const BUYERS: usize = 90;

/// podman-compose from the virtualenv `scripts/validate-deploy` makes.
fn podman_compose() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("the target directory")
        .join("deploy-venv/bin/podman-compose");
    assert!(
        path.exists(),
        "no podman-compose at {}: run scripts/validate-deploy, which installs it \
         (scripts/test does it before the suite)",
        path.display()
    );
    path
}

/// The repository's `deploy/compose.yaml`.
fn compose_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/compose.yaml")
}

/// One podman-compose project of the file and the override; taken down
/// with its volumes when dropped.
struct Project {
    name: String,
    override_file: tempfile::NamedTempFile,
}

impl Project {
    /// `podman-compose -p NAME -f compose.yaml -f OVERRIDE ARGS` with the
    /// secrets the file requires and podman's test configuration.
    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(podman_compose());
        command
            .envs(podman::configuration())
            .env("STOCKADE_ADMIN_TOKEN", TOKEN)
            .env("STOCKADE_PAYMENTS_TOKEN", PAYMENTS_TOKEN)
            .env("STOCKADE_ADMISSION_SECRET", ADMISSION_SECRET)
            .env("STOCKADE_DRAW_KEY", DRAW_KEY)
            .env("POSTGRES_PASSWORD", "unused-by-this-test")
            .arg("-p")
            .arg(&self.name)
            .arg("-f")
            .arg(compose_file())
            .arg("-f")
            .arg(self.override_file.path())
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// Runs podman-compose; its stdout, or what it printed on failure.
    async fn run(&self, args: &[&str]) -> Result<String, String> {
        let mut command = tokio::process::Command::from(self.command(args));
        let output = command
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("podman-compose {}: {e}", args.join(" ")))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "podman-compose {} failed ({}): {stdout}\n{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }
}

impl Project {
    /// The name of the container podman-compose made for `service`.
    async fn container(&self, service: &str) -> String {
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
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = self
            .command(&["down", "--volumes", "--timeout", "0"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The override: the built image, the host network with a port per
/// service (and the health check on it), the throwaway servers.
fn override_yaml(image: &str, ports: &[u16], redis: &str, database: &str) -> String {
    let mut yaml = String::from("services:\n");
    for (service, port) in SERVICES.iter().zip(ports) {
        yaml.push_str(&format!(
            "  {service}:
    image: {image}
    network_mode: host
    networks: !reset []
    depends_on: !reset {{}}
    environment:
      STOCKADE_LISTEN: \"127.0.0.1:{port}\"
      STOCKADE_REDIS_URL: \"{redis}\"
      STOCKADE_DATABASE_URL: \"{database}\"
      STOCKADE_TRUSTED_PROXIES: \"127.0.0.1\"
    healthcheck:
      test: !override [\"CMD\", \"curl\", \"-fsS\", \"-o\", \"/dev/null\", \"http://127.0.0.1:{port}/readyz\"]
"
        ));
    }
    yaml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_compose_files_stockade_services_sell_a_sale_out() {
    let started = Instant::now();
    let image = podman::image().await;
    let redis = RedisServer::start().expect("start redis-server");
    let postgres = PostgresServer::start().expect("start PostgreSQL");
    let database = postgres
        .fresh_database()
        .await
        .expect("a fresh PostgreSQL database");
    let ports: Vec<u16> = SERVICES.iter().map(|_| podman::free_port()).collect();
    let override_file = tempfile::Builder::new()
        .prefix("compose-override-")
        .suffix(".yaml")
        .tempfile()
        .expect("a temporary override file");
    std::fs::write(
        override_file.path(),
        override_yaml(&image, &ports, &redis.url(), &database),
    )
    .expect("writing the override");
    let project = Project {
        name: format!("stockade-compose-test-{}", std::process::id()),
        override_file,
    };
    let mut up = vec!["up", "--detach", "--no-deps"];
    up.extend(SERVICES);
    if let Err(e) = project.run(&up).await {
        panic!("{e}");
    }
    let client = crate::api::client();
    let urls: Vec<String> = ports
        .iter()
        .map(|port| format!("http://127.0.0.1:{port}"))
        .collect();
    let mut containers = Vec::new();
    for service in SERVICES {
        containers.push(project.container(service).await);
    }
    for (url, container) in urls.iter().zip(&containers) {
        wait_ready(&client, url, container).await;
    }
    eprintln!(
        "compose: {} services ready in {:.1} s",
        SERVICES.len(),
        started.elapsed().as_secs_f64()
    );

    // What the file asks of each container, as podman made it.
    for container in &containers {
        let inspect = |format: &'static str| {
            let container = container.clone();
            async move {
                podman::run(&["inspect", "--format", format, &container])
                    .await
                    .unwrap_or_else(|e| panic!("{e}"))
            }
        };
        assert_eq!(inspect("{{.HostConfig.ReadonlyRootfs}}").await, "true");
        // Podman shows a container's stop signal by number.
        let signal = inspect("{{.Config.StopSignal}}").await;
        assert!(
            signal == "15" || signal == "SIGTERM",
            "{container}: stop signal {signal}, not SIGTERM"
        );
        // `stop_grace_period` is not the container's: podman-compose
        // passes it to `podman stop -t` when it stops the service (below).
        let mounts = inspect("{{range .Mounts}}{{.Destination}} {{end}}").await;
        assert!(
            mounts.contains("/var/lib/stockade"),
            "{container}: the data volume is not mounted: {mounts}"
        );
        // Health checks run from systemd timers, which this machine has
        // not: run the file's check once by hand.
        if let Err(e) = podman::run(&["healthcheck", "run", container]).await {
            panic!("{container}: the compose file's health check fails: {e}");
        }
    }

    let created =
        crate::api::create_sale(&client, &urls[0], "compose", STOCK as u64, 1, None).await;
    assert_eq!(created.status(), Some(201), "{}", created.describe());
    let buys = (0..BUYERS).map(|buyer| {
        let client = client.clone();
        let url = urls[buyer % urls.len()].clone();
        async move {
            crate::api::purchase(
                &client,
                &url,
                "compose",
                &format!("buyer-{buyer}"),
                1,
                None,
                false,
            )
            .await
        }
    });
    let answers = futures::future::join_all(buys).await;
    let sold = answers.iter().filter(|a| a.status() == Some(201)).count();
    let sold_out = answers
        .iter()
        .filter(|a| a.status() == Some(409) && a.code() == Some("sold_out"))
        .count();
    let odd: Vec<String> = answers
        .iter()
        .filter(|a| !matches!(a.status(), Some(201 | 409)))
        .map(|a| a.describe())
        .collect();
    assert!(odd.is_empty(), "answers other than 201 or 409: {odd:?}");
    assert_eq!(sold, STOCK, "201s through the three services");
    assert_eq!(sold_out, BUYERS - STOCK, "sold_out answers");
    for url in &urls {
        let sale = crate::api::get_sale(&client, url, "compose").await;
        assert_eq!(
            sale.body()["remaining"],
            0,
            "{url} sees the sale: {}",
            sale.describe()
        );
    }

    // An orchestrator's stop: SIGTERM, a graceful exit within the grace.
    let stopping = Instant::now();
    if let Err(e) = project.run(&["stop", SERVICES[1]]).await {
        panic!("{e}");
    }
    let took = stopping.elapsed();
    let code = podman::run(&["inspect", "--format", "{{.State.ExitCode}}", &containers[1]])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        code, "0",
        "{} exited {code} on podman-compose stop",
        containers[1]
    );
    assert!(took < Duration::from_secs(30), "the stop took {took:?}");
    eprintln!(
        "compose: sold {sold} of {STOCK} through {} services, one stopped in {:.1} s; {:.1} s in all",
        SERVICES.len(),
        took.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// Waits until `/readyz` answers 200, else fails with the container's log.
async fn wait_ready(client: &reqwest::Client, url: &str, container: &str) {
    let started = Instant::now();
    loop {
        if let Ok(response) = client.get(format!("{url}/readyz")).send().await
            && response.status() == 200
        {
            return;
        }
        if started.elapsed() > READY_TIMEOUT {
            let logs = podman::run(&["logs", "--tail", "30", container])
                .await
                .unwrap_or_else(|e| e);
            panic!(
                "{container} not ready on {url} within {} s; its log ends with:\n{logs}",
                READY_TIMEOUT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
