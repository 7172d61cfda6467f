//! What the image promises, checked on the image and on one container of it
//! running the embedded default (SQLite in the data volume, no Redis or
//! PostgreSQL): a non-root user, a read-only root filesystem but a writable
//! volume, a working health check, a graceful stop on SIGTERM, OCI labels,
//! and the thin binary (no `bench`).

use std::time::Duration;

use serde_json::Value;

use crate::podman::{self, Container};

/// The image's user, as the Kubernetes manifests' `runAsUser` expects.
const UID: &str = "10001";
/// The data volume the compose file and the manifests mount.
const DATA: &str = "/var/lib/stockade";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_runs_as_user_10001_on_a_read_only_root_and_stops_on_sigterm() {
    let image = podman::image().await;
    let inspected = podman::run(&["image", "inspect", &image])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let inspected: Value = serde_json::from_str(&inspected).expect("podman image inspect: JSON");
    let config = &inspected[0]["Config"];
    assert_eq!(config["User"], format!("{UID}:{UID}"), "the image's user");
    assert_eq!(config["StopSignal"], "SIGTERM", "the stop signal");
    assert!(
        config["Volumes"].get(DATA).is_some(),
        "{DATA} is a declared volume: {}",
        config["Volumes"]
    );
    assert_eq!(config["Entrypoint"], serde_json::json!(["stockade"]));
    assert_eq!(config["Cmd"], serde_json::json!(["serve"]));
    let health = inspected[0]["Healthcheck"]["Test"].to_string();
    assert!(
        health.contains("/healthz"),
        "a health check on /healthz (build with --format docker): {health}"
    );
    for label in [
        "org.opencontainers.image.title",
        "org.opencontainers.image.licenses",
        "org.opencontainers.image.version",
        "org.opencontainers.image.revision",
    ] {
        assert!(
            config["Labels"].get(label).is_some(),
            "OCI label {label}: {}",
            config["Labels"]
        );
    }

    // The deployment files count on the same user and volume.
    let deploy = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
    let read = |file: &str| {
        std::fs::read_to_string(format!("{deploy}/{file}")).expect("a deployment file")
    };
    let manifest = read("kubernetes/deployment.yaml");
    for expected in [format!("runAsUser: {UID}"), format!("mountPath: {DATA}")] {
        assert!(
            manifest.contains(&expected),
            "deploy/kubernetes/deployment.yaml lacks `{expected}`, which the image needs"
        );
    }
    let compose = read("compose.yaml");
    assert!(
        compose.contains(&format!("-data:{DATA}\"")),
        "deploy/compose.yaml mounts its volumes elsewhere than {DATA}"
    );

    let name = format!("stockade-test-{}-image", std::process::id());
    let token = (
        "STOCKADE_ADMIN_TOKEN",
        "container-test-admin-token".to_owned(),
    );
    let container = Container::run(&image, &name, &[token]).await;
    let client = crate::api::client();
    if let Err(e) = container.wait_ready(&client, Duration::from_secs(60)).await {
        panic!("{e}");
    }

    let uid = container.exec(&["id", "-u"]).await;
    assert_eq!(uid.as_deref(), Ok(UID), "the service's user");
    for outside in [
        "/stockade-probe",
        "/usr/local/bin/stockade-probe",
        "/etc/stockade-probe",
    ] {
        let written = container.exec(&["touch", outside]).await;
        let error = written.expect_err(&format!("{outside} written: the root is not read-only"));
        assert!(
            error.contains("Read-only file system"),
            "writing {outside}: {error}"
        );
    }
    let probe = format!("{DATA}/probe");
    if let Err(e) = container.exec(&["touch", &probe]).await {
        panic!("the data volume is not writable: {e}");
    }
    let store = container.exec(&["ls", DATA]).await.unwrap_or_else(|e| e);
    assert!(
        store
            .lines()
            .any(|f| f.ends_with(".db") || f.contains("sqlite")),
        "the embedded store lives in the volume; {DATA} holds: {store}"
    );

    let healthy = podman::run(&["healthcheck", "run", container.name()]).await;
    assert!(healthy.is_ok(), "the image's health check: {healthy:?}");

    let thin = container.exec(&["stockade", "bench", "--help"]).await;
    assert!(
        thin.is_err(),
        "the image's binary has `stockade bench`: build it with --no-default-features"
    );

    let (code, took) = container.stop().await;
    let log = container.logs(20).await;
    assert_eq!(code, 0, "exit code after SIGTERM (log: {log})");
    assert!(
        took < Duration::from_secs(15),
        "the stop took {took:?}: SIGTERM ignored? (log: {log})"
    );
    assert!(
        log.contains("stopped: every acknowledged order is committed"),
        "a graceful stop; the log ends with:\n{log}"
    );
    eprintln!("image: stopped gracefully in {} ms", took.as_millis());
}
