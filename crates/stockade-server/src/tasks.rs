//! The instance's tasks. Each is spawned on tokio's runtime; inside a
//! [`Tasks::scope`] it is also registered there, and so are the tasks it
//! spawns, so that all of them can be ended at once: how the simulator
//! crashes an instance (a killed process runs nothing more). Outside a
//! scope, as in `stockade serve`, [`spawn`] is `tokio::spawn`.

use std::future::Future;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::task::{AbortHandle, JoinHandle};

tokio::task_local! {
    static SCOPE: Tasks;
}

/// The tasks of one instance.
#[derive(Clone, Default, Debug)]
pub struct Tasks {
    handles: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Tasks {
    /// Runs `future` with every task it spawns (and they spawn) registered
    /// here.
    pub async fn scope<F: Future>(&self, future: F) -> F::Output {
        SCOPE.scope(self.clone(), future).await
    }

    /// Ends every registered task at its next await, as a crash would.
    pub fn abort_all(&self) {
        for handle in self.handles.lock().drain(..) {
            handle.abort();
        }
    }
}

/// Spawns `future`, registered in the current scope if there is one.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match SCOPE.try_with(Clone::clone) {
        Ok(tasks) => {
            let handle = tokio::spawn(SCOPE.scope(tasks.clone(), future));
            let mut handles = tasks.handles.lock();
            handles.retain(|h| !h.is_finished());
            handles.push(handle.abort_handle());
            handle
        }
        Err(_) => tokio::spawn(future),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_scope_ends_its_tasks_and_the_tasks_they_spawned() {
        let tasks = Tasks::default();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<&str>();
        let outside = tokio::spawn({
            let tx = tx.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = tx.send("outside");
            }
        });
        tasks
            .scope(async {
                let tx = tx.clone();
                spawn(async move {
                    spawn(async move {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let _ = tx.send("grandchild");
                    });
                    std::future::pending::<()>().await;
                });
            })
            .await;
        tokio::task::yield_now().await;
        tasks.abort_all();
        drop(tx);
        outside.await.unwrap();
        assert_eq!(rx.recv().await, Some("outside"));
        assert_eq!(rx.recv().await, None, "a task of the scope ran on");
    }
}
