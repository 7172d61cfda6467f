//! A throwaway PostgreSQL server (initdb + postgres on a free port), or, where
//! that is impossible, fresh databases on the server named by `DATABASE_URL`.
//!
//! `initdb` refuses to run as root. When the tests run as root (as CI does)
//! the server is initialised and run as the `postgres` system user instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::{Gid, Uid, User, chown};
use sqlx::Connection;
use tempfile::TempDir;

use crate::process::{ServerProcess, log_tail, wait_until};
use crate::{TestSupportError, binaries, on_a_free_port, on_its_port_again};

/// How a throwaway PostgreSQL trades durability for speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `fsync=off`, `synchronous_commit=off`: for correctness tests.
    Fast,
    /// PostgreSQL's defaults (fsync on): for benchmarks that compare against it.
    Durable,
}

/// A PostgreSQL server for tests. Dropping it stops the server it started.
#[derive(Debug)]
pub struct PostgresServer {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Owned(OwnedServer),
    External { base_url: String },
}

#[derive(Debug)]
struct OwnedServer {
    process: Option<ServerProcess>,
    port: u16,
    run_as: Option<(Uid, Gid)>,
    durability: Durability,
    dir: TempDir,
}

impl PostgresServer {
    /// Starts a fast (fsync off) throwaway server.
    pub fn start() -> Result<Self, TestSupportError> {
        Self::start_with(Durability::Fast)
    }

    /// Starts a throwaway server with the given durability. Falls back to the
    /// server named by `DATABASE_URL` only when running as root with no
    /// `postgres` user to run `initdb` as.
    pub fn start_with(durability: Durability) -> Result<Self, TestSupportError> {
        let run_as = match postgres_user_if_root() {
            Ok(run_as) => run_as,
            Err(TestSupportError::NoPostgresUser) => {
                return match std::env::var("DATABASE_URL") {
                    Ok(base_url) => Ok(Self {
                        inner: Inner::External { base_url },
                    }),
                    Err(_) => Err(TestSupportError::NoPostgresUser),
                };
            }
            Err(e) => return Err(e),
        };
        let dir = tempfile::Builder::new()
            .prefix("stockade-pg-")
            .tempdir()
            .map_err(|e| TestSupportError::Io("creating a temp dir for postgres".into(), e))?;
        if let Some((uid, gid)) = run_as {
            chown(dir.path(), Some(uid), Some(gid)).map_err(|e| {
                TestSupportError::Io("handing the temp dir to postgres".into(), e.into())
            })?;
        }
        initdb(dir.path(), run_as)?;
        let mut server = OwnedServer {
            process: None,
            port: 0,
            run_as,
            durability,
            dir,
        };
        on_a_free_port(|port| {
            server.port = port;
            server.spawn()
        })?;
        Ok(Self {
            inner: Inner::Owned(server),
        })
    }

    /// The URL of the server's `postgres` database (for administration).
    pub fn url(&self) -> String {
        match &self.inner {
            Inner::Owned(server) => server.url("postgres"),
            Inner::External { base_url } => base_url.clone(),
        }
    }

    /// The port of a server this handle started (None for `DATABASE_URL`).
    pub fn port(&self) -> Option<u16> {
        match &self.inner {
            Inner::Owned(server) => Some(server.port),
            Inner::External { .. } => None,
        }
    }

    /// The process id of a server this handle started and runs (the
    /// postmaster, or the wrapper running it as `postgres`): for tools that
    /// account its CPU together with its children's.
    pub fn pid(&self) -> Option<u32> {
        match &self.inner {
            Inner::Owned(server) => server.process.as_ref().and_then(ServerProcess::pid),
            Inner::External { .. } => None,
        }
    }

    /// Creates a new empty database with a unique name and returns its URL.
    pub async fn fresh_database(&self) -> Result<String, TestSupportError> {
        let name = format!("stockade_t_{}", uuid::Uuid::now_v7().simple());
        let admin_url = self.url();
        let mut conn = sqlx::PgConnection::connect(&admin_url)
            .await
            .map_err(|e| TestSupportError::Sql(format!("connecting to {admin_url}"), e))?;
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .map_err(|e| TestSupportError::Sql(format!("creating database {name}"), e))?;
        let _ = conn.close().await;
        Ok(with_database(&admin_url, &name))
    }

    /// Stops the server (fast shutdown), keeping its data: the "PostgreSQL
    /// down" fault. Only for servers this handle started.
    pub fn stop(&mut self) {
        if let Inner::Owned(server) = &mut self.inner
            && let Some(mut process) = server.process.take()
        {
            process.stop();
        }
    }

    /// Kills the server with SIGKILL, keeping its data directory.
    pub fn kill(&mut self) {
        if let Inner::Owned(server) = &mut self.inner
            && let Some(mut process) = server.process.take()
        {
            process.kill();
        }
    }

    /// Starts a stopped server again on the same port and data.
    pub fn start_again(&mut self) -> Result<(), TestSupportError> {
        match &mut self.inner {
            Inner::Owned(server) if server.process.is_none() => {
                on_its_port_again(|| server.spawn())
            }
            _ => Ok(()),
        }
    }

    /// Suspends the server (SIGSTOP): the "PostgreSQL slow" fault.
    pub fn pause(&self) {
        if let Inner::Owned(OwnedServer {
            process: Some(p), ..
        }) = &self.inner
        {
            p.signal(Signal::SIGSTOP);
        }
    }

    /// Resumes a paused server.
    pub fn resume(&self) {
        if let Inner::Owned(OwnedServer {
            process: Some(p), ..
        }) = &self.inner
        {
            p.signal(Signal::SIGCONT);
        }
    }
}

impl OwnedServer {
    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    fn spawn(&mut self) -> Result<(), TestSupportError> {
        let data = self.dir.path().join("data");
        let mut command = Command::new(binaries::postgres_tool("postgres")?);
        command
            .arg("-D")
            .arg(&data)
            .args(["-p", &self.port.to_string()])
            .arg("-k")
            .arg(self.dir.path())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .args(["-c", "max_connections=300"]);
        if self.durability == Durability::Fast {
            command.args([
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
            ]);
        }
        run_as(&mut command, self.run_as);
        let log = self.log();
        if let Some((uid, gid)) = self.run_as {
            // Let the server write its log inside the directory it owns.
            let _ = std::fs::File::create(&log);
            let _ = chown(&log, Some(uid), Some(gid));
        }
        // SIGINT is PostgreSQL's "fast shutdown".
        let mut process = ServerProcess::spawn(command, &log, Signal::SIGINT)?;
        let isready = binaries::postgres_tool("pg_isready")?;
        let port = self.port.to_string();
        let ready = wait_until(Duration::from_secs(30), || {
            process.has_exited()
                || Command::new(&isready)
                    .args(["-q", "-h", "127.0.0.1", "-p", &port, "-U", "postgres"])
                    .status()
                    .is_ok_and(|s| s.success())
        });
        if !ready || process.has_exited() {
            process.kill();
            return Err(TestSupportError::NotReady {
                server: format!("postgres on port {}", self.port),
                seconds: 30,
                tail: log_tail(&log, 20),
                log,
            });
        }
        self.process = Some(process);
        Ok(())
    }
}

fn with_database(url: &str, database: &str) -> String {
    // Replace the path of the URL (after the authority) with the database.
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (authority, query) = match rest.split_once('/') {
        Some((authority, path)) => (authority, path.split_once('?').map(|(_, q)| q)),
        None => (rest, None),
    };
    match query {
        Some(q) => format!("{scheme}://{authority}/{database}?{q}"),
        None => format!("{scheme}://{authority}/{database}"),
    }
}

/// When running as root, the uid/gid of the `postgres` user to run as.
fn postgres_user_if_root() -> Result<Option<(Uid, Gid)>, TestSupportError> {
    if !Uid::effective().is_root() {
        return Ok(None);
    }
    match User::from_name("postgres") {
        Ok(Some(user)) => Ok(Some((user.uid, user.gid))),
        _ => Err(TestSupportError::NoPostgresUser),
    }
}

fn run_as(command: &mut Command, run_as: Option<(Uid, Gid)>) {
    use std::os::unix::process::CommandExt;
    if let Some((uid, gid)) = run_as {
        command.uid(uid.as_raw()).gid(gid.as_raw());
        // HOME of root is not readable by postgres; some tools look there.
        command.env("HOME", "/tmp");
    }
}

fn initdb(dir: &Path, run_as_user: Option<(Uid, Gid)>) -> Result<(), TestSupportError> {
    let mut command = Command::new(binaries::postgres_tool("initdb")?);
    command.arg("-D").arg(dir.join("data")).args([
        "-A",
        "trust",
        "-U",
        "postgres",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
    ]);
    run_as(&mut command, run_as_user);
    let output = command
        .output()
        .map_err(|e| TestSupportError::Io("running initdb".into(), e))?;
    if !output.status.success() {
        return Err(TestSupportError::CommandFailed {
            command: format!("{command:?}"),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn database_is_swapped_into_urls() {
        assert_eq!(
            with_database("postgres://u@h:1/postgres", "x"),
            "postgres://u@h:1/x"
        );
        assert_eq!(with_database("postgres://u@h:1", "x"), "postgres://u@h:1/x");
        assert_eq!(
            with_database("postgres://u@h:1/db?sslmode=disable", "x"),
            "postgres://u@h:1/x?sslmode=disable"
        );
    }
}
