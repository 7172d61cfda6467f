//! The database URL: a bad one is one error naming host:port, and its
//! password is never printed.

use std::time::Duration;

use stockade_test_support::PostgresServer;

use crate::helpers::{PASSWORD, Running, closed_port, run, text};

#[test]
fn a_bad_database_url_is_one_error_naming_host_port_quickly() {
    let port = closed_port();
    let refused = format!("postgres://app:{PASSWORD}@127.0.0.1:{port}/orders");
    let unknown = format!("postgres://app:{PASSWORD}@stockade-no-such-host.invalid:5432/orders");
    for (url, endpoint, cause) in [
        (refused.as_str(), format!("127.0.0.1:{port}"), "refused"),
        (
            unknown.as_str(),
            "stockade-no-such-host.invalid:5432".to_owned(),
            "unknown host",
        ),
    ] {
        let (output, took) = run(
            &[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                url,
                "--startup-wait-ms",
                "0",
            ],
            &[],
        );
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.contains(&format!("PostgreSQL at {endpoint}")),
            "{stderr}"
        );
        assert_eq!(stderr.matches(cause).count(), 1, "{stderr}");
        assert!(!stderr.contains(PASSWORD), "{stderr}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
    }
}

#[test]
fn a_database_that_refuses_the_url_is_named_without_the_password() {
    let postgres = PostgresServer::start().unwrap();
    // A database that does not exist on a server that does.
    let url = postgres
        .url()
        .replacen("://postgres@", &format!("://postgres:{PASSWORD}@"), 1);
    let url = format!(
        "{}/stockade_no_such_database",
        url.rsplit_once('/').unwrap().0
    );
    let port = url
        .split(':')
        .nth(3)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_owned();
    let (output, took) = run(
        &["serve", "--listen", "127.0.0.1:0", "--database-url", &url],
        &[],
    );
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert_eq!(
        stderr.matches("stockade_no_such_database").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains(PASSWORD), "{stderr}");
    // Not a connection failure: no waiting for it.
    assert!(took < Duration::from_secs(8), "took {took:?}");
}

#[test]
fn a_database_password_is_never_printed() {
    let postgres = PostgresServer::start().unwrap();
    let database = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(postgres.fresh_database())
        .unwrap();
    let url = database.replacen("://postgres@", &format!("://postgres:{PASSWORD}@"), 1);
    assert!(url.contains(PASSWORD), "{url}");
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().to_str().unwrap(),
            "--engine",
            "postgres",
            "--database-url",
            &url,
        ],
        &[("RUST_LOG", "debug,sqlx=debug")],
    );
    let banner = running.banner.clone();
    let stderr = running.stop();
    assert!(
        banner.contains("PostgreSQL store at postgres://127.0.0.1:"),
        "{banner}"
    );
    assert!(!banner.contains(PASSWORD), "{banner}");
    assert!(!stderr.contains(PASSWORD), "{stderr}");
}
