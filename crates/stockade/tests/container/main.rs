//! The container image (`deploy/container/Containerfile`) tested with real
//! containers: podman, `--network host`, `--read-only`, on the throwaway
//! Redis and PostgreSQL of the suite.
//!
//! `scripts/test-container --build-only` builds the image first (scripts/test
//! does it before the suite); without podman, its configuration or the image
//! these tests fail saying what to install or run.
//!
//! # Layout
//! - `podman`: the podman commands and one container of the image.
//! - `cluster`: three containers on one Redis and one PostgreSQL.
//! - `image`: what the image promises (user, read-only root, volume,
//!   health check, stop signal, labels, the thin binary).
//! - `sale`: a crowd sells a sale out through the three containers while
//!   one is stopped with SIGTERM and started again.
//! - `compose`: `deploy/compose.yaml` started as the README's Deploy
//!   section says (its commands run as written).
//! - `stack`: that compose stack sells a sale out exactly through HAProxy
//!   while one instance is killed.
//!
//! The crowd, the healing and the checker are the multi-instance suite's
//! (`../multi_instance/`), included as they are: the same invariants judged
//! the same way, whether the instances are processes or containers.
//! `cluster` offers what they ask of their cluster.

mod cluster;
mod compose;
mod image;
mod podman;
mod sale;
mod stack;

#[allow(dead_code)]
#[path = "../multi_instance/api.rs"]
mod api;
#[allow(dead_code)]
#[path = "../multi_instance/checker/mod.rs"]
mod checker;
#[allow(dead_code)]
#[path = "../multi_instance/crowd.rs"]
mod crowd;
#[allow(dead_code)]
#[path = "../multi_instance/evidence.rs"]
mod evidence;
#[allow(dead_code)]
#[path = "../multi_instance/healing.rs"]
mod healing;
#[allow(dead_code)]
#[path = "../multi_instance/history.rs"]
mod history;
#[allow(dead_code)]
#[path = "../multi_instance/payment.rs"]
mod payment;
#[allow(dead_code)]
#[path = "../multi_instance/plan.rs"]
mod plan;

/// `healing` reads the outbox grace period from here.
mod instance {
    pub use crate::cluster::OUTBOX_GRACE_MS;
}
