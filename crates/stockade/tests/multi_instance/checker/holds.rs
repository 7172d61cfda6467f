//! Payment holds: confirms against the store (invariant 3), holds left
//! unsettled and expiries counted once (invariant 5).

use std::collections::{HashMap, HashSet};

use crate::evidence::{ExpiryCounters, StoreOrder};
use crate::history::Confirm;

/// Confirm answers against the store: a 200 means the order is
/// `confirmed`, a 409 `hold_expired` that it is `expired`; and in a sale
/// with holds, a `confirmed` order had at least one confirm sent (nobody
/// else may confirm it).
pub(super) fn payments(
    confirms: &[Confirm],
    store: &[StoreOrder],
    by_id: &HashMap<&str, &StoreOrder>,
    holds: bool,
) -> Vec<String> {
    let mut lines = Vec::new();
    for confirm in confirms {
        let expected = match (confirm.answer.status(), confirm.answer.code()) {
            (Some(200), _) => "confirmed",
            (Some(409), Some("hold_expired")) => "expired",
            _ => continue,
        };
        let found = by_id.get(confirm.order_id.as_str());
        if found.is_none_or(|o| o.status != expected) {
            lines.push(format!(
                "confirm of {} answered {} on instance {}, but the store has it {}",
                confirm.order_id,
                confirm.answer.label(),
                confirm.instance,
                found.map_or("nowhere", |o| o.status.as_str())
            ));
        }
    }
    if holds {
        let paid: HashSet<&str> = confirms.iter().map(|c| c.order_id.as_str()).collect();
        lines.extend(
            store
                .iter()
                .filter(|o| o.status == "confirmed" && !paid.contains(o.order_id.as_str()))
                .map(|o| {
                    format!(
                        "order {} of buyer {} is confirmed, but no confirm was ever sent for it",
                        o.order_id, o.user_id
                    )
                }),
        );
    }
    lines
}

/// Orders that should have been settled by now: any order still `held`,
/// and `expired` orders of a sale without holds.
pub(super) fn unsettled_holds(store: &[StoreOrder], holds: bool) -> Vec<String> {
    store
        .iter()
        .filter(|o| o.status == "held" || !holds && o.status == "expired")
        .map(|o| {
            format!(
                "order {} of buyer {} ×{} is {}{}",
                o.order_id,
                o.user_id,
                o.quantity,
                o.status,
                if holds {
                    ""
                } else {
                    " in a sale without holds"
                }
            )
        })
        .collect()
}

/// The instances' `expired` counters against the store's `expired`
/// orders. Each expiry is counted by the one instance whose transaction
/// made it; a killed instance's counts since its last scrape are lost, so
/// the sum may fall short of the store but never exceed it (that would be
/// an expiry, and its items' return, done twice). Every instance must
/// answer `/metrics` after healing.
pub(super) fn expiry_counted_once(counters: &ExpiryCounters, expired: u64) -> Vec<String> {
    let mut problems = Vec::new();
    let mut counted = 0;
    let mut parts = Vec::new();
    for (instance, count) in counters.after_healing.iter().enumerate() {
        match count {
            Ok(n) => {
                counted += n;
                parts.push(format!("instance {instance}: {n}"));
            }
            Err(error) => problems.push(format!(
                "never healed: the expired counter of instance {instance} could not be read: {error}"
            )),
        }
    }
    for (instance, count) in &counters.before_kills {
        if let Ok(n) = count {
            counted += n;
            parts.push(format!("instance {instance} before it was killed: {n}"));
        }
    }
    if counted > expired {
        problems.push(format!(
            "the instances counted {counted} expiries ({}), but the store has {expired} \
             expired orders: some hold was expired more than once",
            parts.join(", ")
        ));
    }
    problems
}
