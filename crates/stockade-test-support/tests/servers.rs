//! The throwaway servers start, answer, survive the faults tests inject, and
//! clean up after themselves.

use sqlx::Connection;
use stockade_test_support::{PostgresServer, RedisServer};

#[test]
fn redis_starts_answers_and_restarts_empty_on_the_same_port() {
    let mut redis = RedisServer::start().unwrap();
    assert!(redis.command(&["SET", "k", "v"]).unwrap().contains("OK"));
    let port = redis.port();
    redis.restart().unwrap();
    assert_eq!(redis.port(), port);
    // Data is lost on restart: that is the fault being simulated.
    assert!(redis.command(&["GET", "k"]).unwrap().starts_with("$-1"));
}

#[test]
fn redis_directory_is_removed_on_drop() {
    let redis = RedisServer::start().unwrap();
    let dir = redis.log_path().parent().unwrap().to_path_buf();
    assert!(dir.exists());
    drop(redis);
    assert!(!dir.exists());
}

#[tokio::test]
async fn postgres_gives_fresh_databases_and_survives_stop_and_start() {
    let mut pg = PostgresServer::start().unwrap();
    let a = pg.fresh_database().await.unwrap();
    let b = pg.fresh_database().await.unwrap();
    assert_ne!(a, b);
    let mut conn = sqlx::PgConnection::connect(&a).await.unwrap();
    sqlx::query("CREATE TABLE t (x int)")
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query("INSERT INTO t VALUES (7)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    pg.stop();
    assert!(sqlx::PgConnection::connect(&a).await.is_err());
    pg.start_again().unwrap();

    let mut conn = sqlx::PgConnection::connect(&a).await.unwrap();
    let (x,): (i32,) = sqlx::query_as("SELECT x FROM t")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(x, 7);
}

/// A crash of PostgreSQL takes its backends with it. Killing the postmaster
/// alone left them answering on the connections they held until each
/// noticed: `/readyz` read the store "up" after its kill (once in a gate
/// run). The backend is stopped first so that it cannot notice by itself.
#[tokio::test]
async fn postgres_killed_takes_its_connections_with_it() {
    let mut pg = PostgresServer::start().unwrap();
    let url = pg.fresh_database().await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let (backend,): (i32,) = sqlx::query_as("SELECT pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(backend),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .unwrap();
    pg.kill();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while is_alive(backend) {
        assert!(
            std::time::Instant::now() < deadline,
            "backend {backend} outlived its killed postmaster by 10 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// The "PostgreSQL slow" fault freezes the backends too: a query on an open
/// connection waits until the server is resumed.
#[tokio::test]
async fn postgres_paused_freezes_its_open_connections() {
    let pg = PostgresServer::start().unwrap();
    let url = pg.fresh_database().await.unwrap();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    pg.pause();
    let select = sqlx::query("SELECT 1").execute(&mut conn);
    let waited = tokio::time::timeout(std::time::Duration::from_millis(500), select).await;
    assert!(waited.is_err(), "a paused server answered: {waited:?}");
    pg.resume();
    sqlx::query("SELECT 1").execute(&mut conn).await.unwrap();
}

/// Whether `pid` is a process that has not ended (a zombie has).
fn is_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit(") ").next().unwrap_or("").chars().next();
        !matches!(state, Some('Z' | 'X'))
    })
}

#[tokio::test]
async fn headless_chromium_renders_a_page_and_takes_a_screenshot() {
    use stockade_test_support::browser::Chromedriver;
    let driver = Chromedriver::start().unwrap();
    let browser = driver.session().await.unwrap();
    browser
        .goto("data:text/html,<title>ready</title><p id=greeting>hello</p>")
        .await
        .unwrap();
    assert_eq!(browser.title().await.unwrap(), "ready");
    let text = browser
        .find(fantoccini::Locator::Id("greeting"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(text, "hello");
    let shot = driver
        .save_screenshot(&browser, "test-support-smoke.png")
        .await
        .unwrap();
    assert!(std::fs::metadata(&shot).unwrap().len() > 100);
    browser.close().await.unwrap();
}
