//! The HTTP API over a real listener with real concurrent clients, every
//! scenario run on the embedded default (memory + SQLite), on Redis +
//! PostgreSQL, and on `--engine postgres`.

mod scenarios;

macro_rules! on_every_setup {
    ($($scenario:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    let server = crate::common::TestServer::start(crate::common::Setup::Embedded).await;
                    crate::http::scenarios::$scenario(server).await;
                }
            )*
        }
        mod redis_postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    let server = crate::common::TestServer::start(crate::common::Setup::RedisPostgres).await;
                    crate::http::scenarios::$scenario(server).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $scenario() {
                    let server = crate::common::TestServer::start(crate::common::Setup::Postgres).await;
                    crate::http::scenarios::$scenario(server).await;
                }
            )*
        }
    };
}

on_every_setup!(
    seed_100_buyers_for_100_items,
    seed_150_buyers_for_100_items,
    idempotent_replays,
    cancel_returns_stock_once,
    sale_window,
    bad_input_is_a_clear_4xx_and_changes_nothing,
    admin_endpoints_need_the_token,
    operations_endpoints,
    restart_rebuilds_the_engine_from_the_store,
);
