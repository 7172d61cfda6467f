//! A child server process that is stopped when its handle is dropped.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::TestSupportError;

/// A running child process.
#[derive(Debug)]
pub struct ServerProcess {
    child: Option<Child>,
    stop_signal: Signal,
}

impl ServerProcess {
    /// Spawns `command` with its output appended to `log`.
    ///
    /// The child is asked to die with us (`PR_SET_PDEATHSIG`) so that a test
    /// that aborts does not leave servers running.
    pub fn spawn(
        mut command: Command,
        log: &Path,
        stop_signal: Signal,
    ) -> Result<Self, TestSupportError> {
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| TestSupportError::Io(format!("opening {}", log.display()), e))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| TestSupportError::Io("duplicating the log handle".into(), e))?;
        command
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err);
        die_with_parent(&mut command);
        let child = command
            .spawn()
            .map_err(|e| TestSupportError::Io(format!("spawning {command:?}"), e))?;
        Ok(Self {
            child: Some(child),
            stop_signal,
        })
    }

    /// The child's process id, if it is still running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends `signal` to the child and to every process it forked. A
    /// signal to PostgreSQL's postmaster alone leaves its backends (each in
    /// a session of its own) answering on the connections they hold.
    pub fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            signal_tree(pid, signal);
        }
    }

    /// Whether the child has exited.
    pub fn has_exited(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => !matches!(child.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// How the child ended, once it has (None while it runs).
    pub fn exit_status(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|child| child.try_wait().ok().flatten())
    }

    /// Kills the child and every process it forked at once (SIGKILL), and
    /// reaps the child: the crash of a server.
    pub fn kill(&mut self) {
        self.signal(Signal::SIGKILL);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
        }
    }

    /// Stops the child with its stop signal, waits up to 10 s, then kills it.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // A stopped (SIGSTOP) child cannot act on the signal until continued,
        // nor can the processes it forked on the child's orders.
        signal_tree(child.id(), Signal::SIGCONT);
        let _ = kill(Pid::from_raw(child.id() as i32), self.stop_signal);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        signal_tree(child.id(), Signal::SIGKILL);
        let _ = child.wait();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Sends `signal` to `pid` and every process it forked.
fn signal_tree(pid: u32, signal: Signal) {
    for pid in with_descendants(pid) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

/// `pid` and its descendants, parents first, read from `/proc`.
fn with_descendants(pid: u32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let child: i32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
            let parent = stat.rsplit_once(") ")?.1.split(' ').nth(1)?.parse().ok()?;
            Some((child, parent))
        })
        .collect();
    let mut found = vec![pid as i32];
    let mut next = 0;
    while next < found.len() {
        let parent = found[next];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        next += 1;
    }
    found
}

#[allow(unsafe_code)]
fn die_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            libc_prctl_pdeathsig();
            Ok(())
        });
    }
}

#[allow(unsafe_code)]
fn libc_prctl_pdeathsig() {
    const PR_SET_PDEATHSIG: i32 = 1;
    unsafe extern "C" {
        fn prctl(option: i32, arg2: u64, arg3: u64, arg4: u64, arg5: u64) -> i32;
    }
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and nothing else.
    unsafe {
        prctl(PR_SET_PDEATHSIG, Signal::SIGKILL as u64, 0, 0, 0);
    }
}

/// Reads the last `lines` lines of a log file, for error messages.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Polls `ready` every 20 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
