//! No secret is printed at start: every secret setting given (as the
//! variables a deployment sets), the Redis and PostgreSQL URLs with a
//! password each, every log level on. The Redis server requires its
//! password, so the URL's is the one in use.

use stockade_test_support::{PostgresServer, RedisServer};

use crate::helpers::{PASSWORD, Running};

#[test]
fn no_secret_is_printed_at_start_even_at_debug() {
    let redis = RedisServer::start().unwrap();
    redis
        .command(&["CONFIG", "SET", "requirepass", PASSWORD])
        .unwrap();
    let redis_url = format!("redis://:{PASSWORD}@127.0.0.1:{}", redis.port());
    let postgres = PostgresServer::start().unwrap();
    let database = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(postgres.fresh_database())
        .unwrap();
    let database = database.replacen("://postgres@", &format!("://postgres:{PASSWORD}@"), 1);
    let admin = "admin-token-printed-nowhere-0123";
    let payments = "payments-token-printed-nowhere-0123";
    let admission = "admission-secret-printed-nowhere-0123456789";
    let jwt = "jwt-secret-printed-nowhere-0123456789abcdef";
    let draw_key = "draw-key-printed-nowhere-0123456789abcdef";
    let dir = tempfile::tempdir().unwrap();
    let running = Running::start(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ],
        &[
            ("STOCKADE_REDIS_URL", &redis_url),
            ("STOCKADE_DATABASE_URL", &database),
            ("STOCKADE_ADMIN_TOKEN", admin),
            ("STOCKADE_PAYMENTS_TOKEN", payments),
            ("STOCKADE_ADMISSION_SECRET", admission),
            ("STOCKADE_JWT_SECRET", jwt),
            ("STOCKADE_DRAW_KEY", draw_key),
            ("RUST_LOG", "trace"),
        ],
    );
    let banner = running.banner.clone();
    let stderr = running.stop();
    let engine = format!("Redis engine at redis://127.0.0.1:{}", redis.port());
    assert!(banner.contains(&engine), "{banner}");
    assert!(
        banner.contains("PostgreSQL store at postgres://127.0.0.1:"),
        "{banner}"
    );
    for secret in [PASSWORD, admin, payments, admission, jwt, draw_key] {
        assert!(!banner.contains(secret), "{secret} in {banner}");
        assert!(!stderr.contains(secret), "{secret} in the log:\n{stderr}");
    }
}
