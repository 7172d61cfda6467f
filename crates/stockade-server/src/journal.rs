//! The intake journal of the embedded default: where an order named to a
//! client before its commit (202 `pending`, 503 with an `order_id`) is kept
//! durably when the engine is this process's memory.
//!
//! On Redis, such an order also sits in Redis's outbox, which outlives the
//! process. The memory engine's outbox dies with the process, so before the
//! service names an uncommitted order it appends the order to this file and
//! syncs it to disk (one sync for every order that arrives meanwhile: a
//! group commit). At the next start, before anything else, every order in
//! the file is committed (a commit is idempotent) and the file emptied. A
//! background pass drops the orders the store has decided, so the file only
//! holds what is still in flight.
//!
//! The file is JSON lines, one [`Order`] each; a torn last line (a crash
//! mid-write) was never synced, so never named, and is skipped.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use stockade_core::{Order, OrderId};
use tokio::sync::{mpsc, oneshot};

use stockade_store::{Calls, OrderStore};

/// How often the orders the store has decided are dropped from the file.
pub const COMPACT_EVERY: Duration = Duration::from_secs(2);

/// The journal could not keep an order.
#[derive(Debug, thiserror::Error)]
#[error("the intake journal {path}: {reason}")]
pub struct JournalError {
    path: String,
    reason: String,
}

enum Request {
    Record(Order, oneshot::Sender<Result<(), String>>),
    Forget(HashSet<OrderId>),
}

/// Where requests to the file go.
#[derive(Clone, Debug)]
enum Writer {
    /// To the writer thread, which groups them.
    Thread(mpsc::UnboundedSender<Request>),
    /// Done by the caller, each to its end ([`Calls::Inline`]).
    Inline(Arc<Mutex<File>>),
}

/// The journal; cheap to clone.
#[derive(Clone, Debug)]
pub struct IntakeJournal {
    path: Arc<PathBuf>,
    writer: Writer,
    /// The orders in the file, in order.
    kept: Arc<Mutex<Vec<Order>>>,
}

impl IntakeJournal {
    /// Opens (or creates) the journal at `path`; also returns the orders a
    /// previous run left in it, to be committed before anything else.
    /// With [`Calls::Inline`] each request is written by its caller
    /// before it returns (the simulator's), else by a writer thread.
    pub fn open(path: &Path, calls: Calls) -> std::io::Result<(Self, Vec<Order>)> {
        let left = read(path)?;
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let kept = Arc::new(Mutex::new(left.clone()));
        let writer = match calls {
            Calls::Inline => Writer::Inline(Arc::new(Mutex::new(file))),
            Calls::Async => {
                let (requests, inbox) = mpsc::unbounded_channel();
                let path = path.to_path_buf();
                let kept = Arc::clone(&kept);
                std::thread::Builder::new()
                    .name("intake-journal".into())
                    .spawn(move || write_forever(&path, file, inbox, &kept))?;
                Writer::Thread(requests)
            }
        };
        let journal = Self {
            path: Arc::new(path.to_path_buf()),
            writer,
            kept,
        };
        Ok((journal, left))
    }

    /// Hands `request` to the writer.
    fn send(&self, request: Request) -> Result<(), ()> {
        match &self.writer {
            Writer::Thread(requests) => requests.send(request).map_err(|_| ()),
            Writer::Inline(file) => {
                write_group(&self.path, &mut file.lock(), vec![request], &self.kept);
                Ok(())
            }
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `order` and returns once it is on disk.
    pub async fn record(&self, order: &Order) -> Result<(), JournalError> {
        let (done, synced) = oneshot::channel();
        let fail = |reason: String| JournalError {
            path: self.path.display().to_string(),
            reason,
        };
        self.send(Request::Record(order.clone(), done))
            .map_err(|()| fail("the journal's writer has stopped".into()))?;
        synced
            .await
            .map_err(|_| fail("the journal's writer has stopped".into()))?
            .map_err(fail)
    }

    /// How many orders the file holds.
    pub fn len(&self) -> usize {
        self.kept.lock().len()
    }

    /// Whether the file holds no order.
    pub fn is_empty(&self) -> bool {
        self.kept.lock().is_empty()
    }

    /// Drops from the file every order the store has decided; returns how
    /// many orders remain.
    pub async fn compact(&self, store: &OrderStore) -> Result<usize, stockade_store::StoreError> {
        let ids: Vec<OrderId> = self.kept.lock().iter().map(|o| o.id).collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let decided = store.decided(&ids).await?;
        let remaining = ids.len() - decided.len();
        if !decided.is_empty() {
            let _ = self.send(Request::Forget(decided));
        }
        Ok(remaining)
    }
}

/// Every whole order line of the file at `path` (none if it is missing).
fn read(path: &Path) -> std::io::Result<Vec<Order>> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error),
    };
    let mut orders = Vec::new();
    for line in BufReader::new(file).lines() {
        let line = line?;
        match serde_json::from_str::<Order>(&line) {
            Ok(order) => orders.push(order),
            Err(error) => {
                tracing::warn!(%error, "skipping a torn line of the intake journal (never synced, never named)")
            }
        }
    }
    Ok(orders)
}

/// The writer thread: appends what arrives, one sync per group; rewrites
/// the file without the orders the store has decided.
fn write_forever(
    path: &Path,
    mut file: File,
    mut inbox: mpsc::UnboundedReceiver<Request>,
    kept: &Mutex<Vec<Order>>,
) {
    while let Some(first) = inbox.blocking_recv() {
        let mut group = vec![first];
        while let Ok(request) = inbox.try_recv() {
            group.push(request);
        }
        write_group(path, &mut file, group, kept);
    }
}

/// Does one group of requests: the forgets (a rewrite), then the records
/// (one append and one sync), answering each record once it is on disk.
fn write_group(path: &Path, file: &mut File, group: Vec<Request>, kept: &Mutex<Vec<Order>>) {
    let mut waiting = Vec::new();
    let mut forget = HashSet::new();
    for request in group {
        match request {
            Request::Record(order, done) => waiting.push((order, done)),
            Request::Forget(ids) => forget.extend(ids),
        }
    }
    if !forget.is_empty() {
        let mut all = kept.lock();
        all.retain(|o| !forget.contains(&o.id));
        match rewrite(path, &all) {
            Ok(fresh) => *file = fresh,
            Err(error) => tracing::warn!(%error, "cannot compact the intake journal; retrying"),
        }
    }
    if waiting.is_empty() {
        return;
    }
    let mut lines = Vec::new();
    for (order, _) in &waiting {
        if let Ok(line) = serde_json::to_vec(order) {
            lines.extend(line);
            lines.push(b'\n');
        }
    }
    let written = file
        .write_all(&lines)
        .and_then(|()| file.sync_data())
        .map_err(|e| e.to_string());
    if written.is_ok() {
        kept.lock().extend(waiting.iter().map(|(o, _)| o.clone()));
    }
    for (_, done) in waiting {
        let _ = done.send(written.clone());
    }
}

/// Replaces the file with `orders`, atomically (a new file renamed over
/// the old one), and returns it opened for appending.
fn rewrite(path: &Path, orders: &[Order]) -> std::io::Result<File> {
    let fresh = path.with_extension("rewrite");
    {
        let mut file = File::create(&fresh)?;
        for order in orders {
            let mut line = serde_json::to_vec(order).map_err(std::io::Error::other)?;
            line.push(b'\n');
            file.write_all(&line)?;
        }
        file.sync_all()?;
    }
    std::fs::rename(&fresh, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    OpenOptions::new().append(true).open(path)
}

/// Commits what a previous run left in the journal (before the engine is
/// rebuilt under a new epoch, so the orders' epoch is still the sale's),
/// then empties it. Fails if the store cannot take them: the service must
/// not start and name new orders while older named ones are uncommitted.
pub async fn commit_left(
    journal: &IntakeJournal,
    left: &[Order],
    store: &OrderStore,
) -> Result<(), stockade_store::StoreError> {
    if left.is_empty() {
        return Ok(());
    }
    let verdicts = store.commit(left).await?;
    crate::writer::log_voids(left, &verdicts);
    tracing::info!(
        orders = left.len(),
        journal = %journal.path().display(),
        "committed the orders named before the last stop that the store did not have"
    );
    let remaining = journal.compact(store).await?;
    debug_assert_eq!(remaining, 0);
    Ok(())
}

/// Drops decided orders from the journal every [`COMPACT_EVERY`].
pub async fn compact_forever(journal: IntakeJournal, store: OrderStore) {
    let mut tick = tokio::time::interval(COMPACT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if journal.is_empty() {
            continue;
        }
        if let Err(error) = journal.compact(&store).await {
            tracing::debug!(%error, "cannot compact the intake journal yet");
        }
    }
}
