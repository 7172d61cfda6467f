//! The pause scenario from the fencing debate: a holder paused past its
//! lease wakes up and writes; the database refuses its write.

use std::time::Duration;

use sqlx::{Connection, PgConnection};
use stockade_lock::postgres::{FenceError, advance_fence, create_fence_table, expect_fenced};
use stockade_lock::{FencingToken, LockGuard, Locks};
use stockade_test_support::PostgresServer;
use tokio::sync::oneshot;

use crate::support::{client, redis};

/// A write of `value` to account 1, admitted by the fence row.
async fn fenced_write(database: &str, token: FencingToken, value: &str) -> Result<(), FenceError> {
    let mut connection = PgConnection::connect(database).await?;
    let mut tx = connection.begin().await?;
    advance_fence(&mut tx, "account:1", token).await?;
    sqlx::query("UPDATE accounts SET owner = $1 WHERE id = 1")
        .bind(value)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

/// A write of `value` to account 1 through its own fence column.
async fn fenced_column_write(
    database: &str,
    token: FencingToken,
    value: &str,
) -> Result<(), FenceError> {
    let mut connection = PgConnection::connect(database).await?;
    let result =
        sqlx::query("UPDATE accounts SET owner = $1, fence = $2 WHERE id = 1 AND fence < $2")
            .bind(value)
            .bind(token.as_i64())
            .execute(&mut connection)
            .await?;
    expect_fenced(&result, "account:1", token)
}

async fn owner(database: &str) -> String {
    let mut connection = PgConnection::connect(database).await.unwrap();
    sqlx::query_scalar("SELECT owner FROM accounts WHERE id = 1")
        .fetch_one(&mut connection)
        .await
        .unwrap()
}

async fn set_up(database: &str) {
    let mut connection = PgConnection::connect(database).await.unwrap();
    create_fence_table(&mut connection).await.unwrap();
    sqlx::query("CREATE TABLE accounts (id BIGINT PRIMARY KEY, owner TEXT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)")
        .execute(&mut connection)
        .await
        .unwrap();
    sqlx::query("INSERT INTO accounts (id, owner) VALUES (1, 'nobody')")
        .execute(&mut connection)
        .await
        .unwrap();
}

/// Holder A takes the lock, is suspended past its lease (it awaits a signal
/// that comes too late), then wakes up and writes with its old token.
async fn paused_holder_scenario(
    locks_a: Locks,
    locks_b: Locks,
    database: String,
    write: impl AsyncFn(&str, FencingToken, &str) -> Result<(), FenceError>,
) -> (Result<(), FenceError>, FencingToken, FencingToken) {
    let lease = Duration::from_millis(400);
    let guard_a: LockGuard = locks_a.try_lock("account:1", lease).await.unwrap().unwrap();
    let token_a = guard_a.fence();
    let (resume, paused) = oneshot::channel::<()>();

    // A is suspended: it holds the guard but does nothing.
    let a = async move {
        paused.await.unwrap();
        token_a
    };

    // Meanwhile A's lease runs out, and B takes the lock and writes.
    let guard_b = locks_b
        .lock_with("account:1", Duration::from_secs(5), Duration::from_secs(10))
        .await
        .unwrap();
    let token_b = guard_b.fence();
    assert!(token_b > token_a);
    write(&database, token_b, "B").await.unwrap();

    // A wakes up, unaware, and writes with its token.
    resume.send(()).unwrap();
    let token = a.await;
    let late_write = write(&database, token, "A").await;
    assert!(guard_a.is_lost());
    guard_b.release().await.unwrap();
    (late_write, token_a, token_b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holders_late_write_is_rejected_by_the_fence_row() {
    let server = redis();
    let postgres = PostgresServer::start().expect("starting PostgreSQL");
    let database = postgres.fresh_database().await.unwrap();
    set_up(&database).await;
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);

    let (late, token_a, token_b) =
        paused_holder_scenario(a, b, database.clone(), fenced_write).await;
    match late {
        Err(FenceError::Stale {
            presented, current, ..
        }) => {
            assert_eq!(presented, token_a);
            assert_eq!(current, Some(token_b.as_i64()));
        }
        other => panic!("the stale write was not refused: {other:?}"),
    }
    assert_eq!(owner(&database).await, "B");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_holders_late_write_is_rejected_by_the_fence_column() {
    let server = redis();
    let postgres = PostgresServer::start().expect("starting PostgreSQL");
    let database = postgres.fresh_database().await.unwrap();
    set_up(&database).await;
    let (a, b) = (client(&server.url()).await, client(&server.url()).await);

    let (late, token_a, _) =
        paused_holder_scenario(a, b, database.clone(), fenced_column_write).await;
    assert!(
        matches!(late, Err(FenceError::Stale { presented, .. }) if presented == token_a),
        "{late:?}"
    );
    assert_eq!(owner(&database).await, "B");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_equal_token_is_refused_and_changes_nothing() {
    let server = redis();
    let postgres = PostgresServer::start().expect("starting PostgreSQL");
    let database = postgres.fresh_database().await.unwrap();
    set_up(&database).await;
    let locks = client(&server.url()).await;
    let guard = locks.lock("account:1").await.unwrap();
    let token = guard.fence();
    fenced_write(&database, token, "first").await.unwrap();
    // The same token again (a retried or duplicated write, or a token that
    // repeated): refused, and the row keeps the first write.
    match fenced_write(&database, token, "again").await {
        Err(FenceError::Stale {
            presented, current, ..
        }) => {
            assert_eq!(presented, token);
            assert_eq!(current, Some(token.as_i64()));
        }
        other => panic!("an equal token was admitted: {other:?}"),
    }
    assert_eq!(owner(&database).await, "first");
    fenced_column_write(&database, token, "column")
        .await
        .unwrap();
    let again = fenced_column_write(&database, token, "column again").await;
    assert!(matches!(again, Err(FenceError::Stale { .. })), "{again:?}");
    assert_eq!(owner(&database).await, "column");
    guard.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_holder_writes_several_times_in_its_fenced_transaction() {
    let server = redis();
    let postgres = PostgresServer::start().expect("starting PostgreSQL");
    let database = postgres.fresh_database().await.unwrap();
    set_up(&database).await;
    let locks = client(&server.url()).await;
    let guard = locks.lock("account:1").await.unwrap();
    let mut connection = PgConnection::connect(&database).await.unwrap();
    let mut tx = connection.begin().await.unwrap();
    advance_fence(&mut tx, "account:1", guard.fence())
        .await
        .unwrap();
    for value in ["first", "second"] {
        sqlx::query("UPDATE accounts SET owner = $1 WHERE id = 1")
            .bind(value)
            .execute(&mut *tx)
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    assert_eq!(owner(&database).await, "second");
    guard.release().await.unwrap();
}
