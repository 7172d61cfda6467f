//! A throwaway headless Chromium driven over WebDriver, for the tests of the
//! pages the service serves (the waiting room, the dashboard).
//!
//! [`Chromedriver::start`] runs Debian's `chromedriver` on a free port;
//! [`Chromedriver::session`] opens a fresh headless browser (its own profile,
//! so cookies never leak between buyers) as a [`fantoccini::Client`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use stockade_test_support::browser::Chromedriver;
//! let driver = Chromedriver::start()?;
//! let browser = driver.session().await?;
//! browser.goto("http://127.0.0.1:8080/queue/launch").await?;
//! driver.save_screenshot(&browser, "queue.png").await?;
//! browser.close().await?;
//! # Ok(()) }
//! ```

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;
use tempfile::TempDir;

use crate::process::{ServerProcess, log_tail, wait_until};
use crate::{TestSupportError, binaries, on_a_free_port};

/// A running `chromedriver`, stopped on drop.
#[derive(Debug)]
pub struct Chromedriver {
    _process: ServerProcess,
    port: u16,
    chromium: PathBuf,
    dir: TempDir,
}

impl Chromedriver {
    /// Starts `chromedriver` on a free loopback port.
    ///
    /// Fails with the package to install when `chromium` or `chromedriver`
    /// is missing (scripts/test installs both).
    pub fn start() -> Result<Self, TestSupportError> {
        let chromium = binaries::find("chromium", "chromium")?;
        let chromedriver = binaries::find("chromedriver", "chromium-driver")?;
        let dir = tempfile::Builder::new()
            .prefix("stockade-chromedriver-")
            .tempdir()
            .map_err(|e| TestSupportError::Io("creating a temp dir for chromedriver".into(), e))?;
        let log = dir.path().join("chromedriver.log");
        let (process, port) = on_a_free_port(|port| {
            let mut command = Command::new(&chromedriver);
            command.arg(format!("--port={port}"));
            let process = ServerProcess::spawn(command, &log, Signal::SIGTERM)?;
            let ready = wait_until(Duration::from_secs(20), || {
                TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            if ready {
                return Ok((process, port));
            }
            Err(TestSupportError::NotReady {
                server: format!("chromedriver on port {port}"),
                seconds: 20,
                log: log.clone(),
                tail: log_tail(&log, 20),
            })
        })?;
        Ok(Self {
            _process: process,
            port,
            chromium,
            dir,
        })
    }

    /// The WebDriver endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Opens a new headless Chromium with its own empty profile.
    ///
    /// Root needs `--no-sandbox` (CI runs as root); `/dev/shm` is small in
    /// containers, hence `--disable-dev-shm-usage`.
    pub async fn session(&self) -> Result<fantoccini::Client, TestSupportError> {
        let profile = tempfile::Builder::new()
            .prefix("profile-")
            .tempdir_in(self.dir.path())
            .map_err(|e| TestSupportError::Io("creating a browser profile dir".into(), e))?
            .keep();
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": self.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.display()),
                ],
            }),
        );
        // chromedriver listens on loopback: plain HTTP, no TLS stack.
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        fantoccini::ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&self.url())
            .await
            .map_err(|e| {
                TestSupportError::Browser(format!(
                    "opening a headless Chromium session through {}: {e}; chromedriver's log ends with:\n{}",
                    self.url(),
                    log_tail(&self.dir.path().join("chromedriver.log"), 20)
                ))
            })
    }

    /// Writes a PNG screenshot of `browser`'s window to `target/screenshots/<name>`
    /// (for review) and returns the path.
    pub async fn save_screenshot(
        &self,
        browser: &fantoccini::Client,
        name: &str,
    ) -> Result<PathBuf, TestSupportError> {
        let png = browser
            .screenshot()
            .await
            .map_err(|e| TestSupportError::Browser(format!("taking a screenshot: {e}")))?;
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir)
            .map_err(|e| TestSupportError::Io(format!("creating {}", dir.display()), e))?;
        let path = dir.join(name);
        std::fs::write(&path, png)
            .map_err(|e| TestSupportError::Io(format!("writing {}", path.display()), e))?;
        Ok(path)
    }
}

/// `target/screenshots` of the workspace (or of `CARGO_TARGET_DIR`).
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../target")
                .to_path_buf()
        });
    target.join("screenshots")
}
