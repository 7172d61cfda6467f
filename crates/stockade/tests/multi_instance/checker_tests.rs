//! The checker must be able to fail: hand-made bad histories, each of
//! which it must report under the right invariant.

use serde_json::json;

use crate::checker::{Violation, check};
use crate::evidence::{Evidence, ExpiryCounters, Healing, StoreOrder, Terms};
use crate::history::{Answer, Cancel, Confirm, History, Item, Phase, Purchase, PurchaseRequest};

pub(crate) fn purchase(
    instance: usize,
    buyer: &str,
    quantity: u32,
    key: Option<&str>,
    answer: Answer,
) -> Purchase {
    Purchase {
        request: PurchaseRequest {
            instance,
            buyer: buyer.into(),
            quantity,
            items: None,
            key: key.map(str::to_owned),
            phase: Phase::Crowd,
        },
        answer,
    }
}

pub(crate) fn order(status: u16, id: &str, buyer: &str, quantity: u32) -> Answer {
    Answer::Http {
        status,
        body: json!({"order_id": id, "user_id": buyer, "quantity": quantity, "status": "confirmed"}),
        retry_after: None,
    }
}

pub(crate) fn error(status: u16, code: &str) -> Answer {
    Answer::Http {
        status,
        body: json!({"error": {"code": code, "message": "..."}}),
        retry_after: None,
    }
}

/// An order of the store, of the one SKU `default`.
pub(crate) fn stored(id: &str, buyer: &str, quantity: u64, status: &str) -> StoreOrder {
    StoreOrder {
        order_id: id.into(),
        user_id: buyer.into(),
        quantity,
        items: vec![Item::new("default", quantity as u32)],
        status: status.into(),
    }
}

/// Stock 3, limit 2: u1 buys 2 with a key (and replays it elsewhere), u2
/// buys 1 and cancels nothing, u3 finds it sold out.
fn good() -> Evidence {
    Evidence {
        terms: Terms {
            sale: "s".into(),
            stock: 3,
            per_user_limit: 2,
            hold_seconds: None,
        },
        history: History {
            purchases: vec![
                purchase(0, "u1", 2, Some("k1"), order(201, "o1", "u1", 2)),
                purchase(1, "u1", 2, Some("k1"), order(200, "o1", "u1", 2)),
                purchase(2, "u2", 1, None, order(201, "o2", "u2", 1)),
                purchase(0, "u3", 1, None, error(409, "sold_out")),
                purchase(1, "u3", 1, None, Answer::None("connection refused".into())),
            ],
            cancels: vec![],
            confirms: vec![],
        },
        store: Ok(vec![
            stored("o1", "u1", 2, "confirmed"),
            stored("o2", "u2", 1, "confirmed"),
        ]),
        healing: Healing::healed(3, 3, &[]),
        expiry_counters: None,
    }
}

pub(crate) fn invariants(violations: &[Violation]) -> Vec<u8> {
    violations.iter().map(|v| v.invariant).collect()
}

pub(crate) fn report(violations: &[Violation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_good_history_passes() {
    let violations = check(&good());
    assert!(violations.is_empty(), "{}", report(&violations));
}

#[test]
fn an_oversold_store_is_reported() {
    let mut evidence = good();
    evidence
        .store
        .as_mut()
        .unwrap()
        .push(stored("o3", "u3", 1, "confirmed"));
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [1, 5], "{}", report(&violations));
    assert!(
        violations[0].message.contains("oversold by 1"),
        "{}",
        report(&violations)
    );
}

#[test]
fn an_unacknowledged_201_is_reported() {
    let mut evidence = good();
    evidence
        .history
        .purchases
        .push(purchase(2, "u4", 1, None, order(201, "o9", "u4", 1)));
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [3], "{}", report(&violations));
    assert!(
        violations[0]
            .message
            .contains("o9, which the store does not have"),
        "{}",
        report(&violations)
    );
}

#[test]
fn a_201_for_an_order_the_store_cancelled_by_itself_is_reported() {
    let mut evidence = good();
    evidence.store.as_mut().unwrap()[1].status = "cancelled".into();
    let violations = check(&evidence);
    assert!(
        invariants(&violations).contains(&3),
        "{}",
        report(&violations)
    );
    // Cancelled by the buyer: fine for invariant 3.
    evidence.history.cancels.push(Cancel {
        instance: 0,
        order_id: "o2".into(),
        answer: order(200, "o2", "u2", 1),
    });
    assert!(!invariants(&check(&evidence)).contains(&3));
}

#[test]
fn two_orders_for_one_key_are_reported() {
    let mut evidence = good();
    evidence.history.purchases[1].answer = order(201, "o5", "u1", 2);
    evidence.store = Ok(vec![
        stored("o1", "u1", 2, "confirmed"),
        stored("o2", "u2", 1, "confirmed"),
        stored("o5", "u1", 2, "confirmed"),
    ]);
    let violations = check(&evidence);
    let numbers = invariants(&violations);
    assert!(numbers.contains(&4), "{}", report(&violations));
    let text = report(&violations);
    assert!(text.contains("answers name 2 different orders"), "{text}");
    assert!(text.contains("yet the store has 2 orders"), "{text}");
}

#[test]
fn a_second_order_for_a_key_without_a_second_answer_is_reported() {
    let mut evidence = good();
    evidence.history.purchases[1].answer = Answer::None("timed out".into());
    evidence.store = Ok(vec![
        stored("o5", "u1", 2, "confirmed"),
        stored("o2", "u2", 1, "confirmed"),
    ]);
    let text = report(&check(&evidence));
    assert!(
        text.contains("answers name o1, but the store's order is o5"),
        "{text}"
    );
}

#[test]
fn an_over_limit_buyer_is_reported() {
    let mut evidence = good();
    evidence.terms.stock = 5;
    evidence
        .store
        .as_mut()
        .unwrap()
        .push(stored("o6", "u2", 2, "confirmed"));
    evidence.healing = Healing::healed(3, 5, &[]);
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [2], "{}", report(&violations));
    assert!(
        violations[0].message.contains("buyer u2 holds 3"),
        "{}",
        report(&violations)
    );
}

#[test]
fn never_healing_and_a_wrong_sale_view_are_reported() {
    let mut evidence = good();
    evidence.healing.ready = Err("instance 1 answered 503 rebuilding".into());
    evidence.healing.sale_views[2] = Answer::Http {
        status: 200,
        body: json!({"stock": 3, "remaining": 1, "sold": 2}),
        retry_after: None,
    };
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [5, 5], "{}", report(&violations));
    let text = report(&violations);
    assert!(text.contains("never healed: instance 1"), "{text}");
    assert!(
        text.contains("instance 2 reports remaining 1 and sold 2"),
        "{text}"
    );
}

#[test]
fn undersold_store_is_reported() {
    let mut evidence = good();
    evidence.store.as_mut().unwrap().pop();
    evidence.history.purchases.remove(2);
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [5], "{}", report(&violations));
}

#[test]
fn a_cancel_answered_200_but_not_recorded_is_reported() {
    let mut evidence = good();
    evidence.history.cancels.push(Cancel {
        instance: 1,
        order_id: "o2".into(),
        answer: order(200, "o2", "u2", 1),
    });
    let text = report(&check(&evidence));
    assert!(
        text.contains(
            "cancel of o2 answered 200 (cancelled) on instance 1, but the store has it confirmed"
        ),
        "{text}"
    );
}

/// A cancel that came after the hold ran out is answered 200 with the
/// order as it stands, `expired`: that is what the store holds.
#[test]
fn a_cancel_answered_200_expired_matches_an_expired_order() {
    let mut evidence = good();
    evidence.store.as_mut().unwrap()[1].status = "expired".into();
    let mut answer = order(200, "o2", "u2", 1);
    if let Answer::Http { body, .. } = &mut answer {
        body["status"] = json!("expired");
    }
    evidence.history.cancels.push(Cancel {
        instance: 1,
        order_id: "o2".into(),
        answer: answer.clone(),
    });
    let text = report(&check(&evidence));
    assert!(!text.contains("cancel of o2"), "{text}");
    // Told `expired`, but the store has it cancelled: reported.
    evidence.store.as_mut().unwrap()[1].status = "cancelled".into();
    let text = report(&check(&evidence));
    assert!(
        text.contains(
            "cancel of o2 answered 200 (expired) on instance 1, but the store has it cancelled"
        ),
        "{text}"
    );
}

#[test]
fn a_replay_denying_a_committed_order_is_reported() {
    let mut evidence = good();
    evidence.history.purchases[1].answer = Answer::Http {
        status: 409,
        body: json!({"error": {"code": "order_failed", "message": "...", "order_id": "o1"}}),
        retry_after: None,
    };
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [4], "{}", report(&violations));
    assert!(
        violations[0].message.contains("order_failed") && violations[0].message.contains("o1"),
        "{}",
        report(&violations)
    );
}

fn held(status: u16, id: &str, buyer: &str, quantity: u32) -> Answer {
    Answer::Http {
        status,
        body: json!({"order_id": id, "user_id": buyer, "quantity": quantity, "status": "held"}),
        retry_after: None,
    }
}

fn confirm(instance: usize, id: &str, answer: Answer) -> Confirm {
    Confirm {
        instance,
        order_id: id.into(),
        answer,
    }
}

/// Stock 3, limit 2, 2-second holds: u1 pays for o1 (after a confirm that
/// got no answer), u2 never pays and o2 expires, u4 pays too late for o4,
/// and u3 buys o2's returned item and pays. Instance 2 was killed after
/// counting one expiry; instance 0 counted the other after healing.
fn good_holds() -> Evidence {
    Evidence {
        terms: Terms {
            sale: "h".into(),
            stock: 3,
            per_user_limit: 2,
            hold_seconds: Some(2),
        },
        history: History {
            purchases: vec![
                purchase(0, "u1", 2, Some("k1"), held(201, "o1", "u1", 2)),
                purchase(1, "u2", 1, None, held(201, "o2", "u2", 1)),
                purchase(2, "u4", 1, None, held(201, "o4", "u4", 1)),
                purchase(0, "u3", 1, None, error(409, "sold_out")),
                purchase(1, "u3", 1, None, held(201, "o3", "u3", 1)),
            ],
            cancels: vec![],
            confirms: vec![
                confirm(1, "o1", Answer::None("connection reset".into())),
                confirm(2, "o1", order(200, "o1", "u1", 2)),
                confirm(0, "o4", error(409, "hold_expired")),
                confirm(2, "o3", order(200, "o3", "u3", 1)),
            ],
        },
        store: Ok(vec![
            stored("o1", "u1", 2, "confirmed"),
            stored("o2", "u2", 1, "expired"),
            stored("o4", "u4", 1, "expired"),
            stored("o3", "u3", 1, "confirmed"),
        ]),
        healing: Healing::healed(3, 3, &[]),
        expiry_counters: Some(ExpiryCounters {
            after_healing: vec![Ok(1), Ok(0), Ok(0)],
            before_kills: vec![(2, Ok(1))],
        }),
    }
}

#[test]
fn a_good_history_with_holds_passes() {
    let violations = check(&good_holds());
    assert!(violations.is_empty(), "{}", report(&violations));
}

#[test]
fn a_confirm_answered_200_for_an_expired_order_is_reported() {
    let mut evidence = good_holds();
    evidence.store.as_mut().unwrap()[0].status = "expired".into();
    let text = report(&check(&evidence));
    assert!(
        text.contains(
            "invariant 3 (no lost acknowledgement): 1 confirms (payments) and orders do not match"
        ) && text
            .contains("confirm of o1 answered 200 on instance 2, but the store has it expired"),
        "{text}"
    );
}

#[test]
fn a_hold_expired_answer_for_a_confirmed_order_is_reported() {
    let mut evidence = good_holds();
    evidence.store.as_mut().unwrap()[2].status = "confirmed".into();
    let text = report(&check(&evidence));
    assert!(
        text.contains(
            "confirm of o4 answered 409 hold_expired on instance 0, but the store has it confirmed"
        ),
        "{text}"
    );
}

#[test]
fn a_confirmed_order_nobody_paid_for_is_reported() {
    let mut evidence = good_holds();
    evidence.store.as_mut().unwrap()[1].status = "confirmed".into();
    evidence.store.as_mut().unwrap()[3].status = "expired".into();
    evidence.history.confirms.pop();
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [3], "{}", report(&violations));
    assert!(
        violations[0]
            .message
            .contains("order o2 of buyer u2 is confirmed, but no confirm was ever sent for it"),
        "{}",
        report(&violations)
    );
}

#[test]
fn a_hold_left_held_is_reported() {
    let mut evidence = good_holds();
    evidence.store.as_mut().unwrap()[1].status = "held".into();
    evidence.store.as_mut().unwrap()[3].status = "expired".into();
    evidence.history.confirms.pop();
    evidence.expiry_counters = Some(ExpiryCounters {
        after_healing: vec![Ok(1), Ok(0), Ok(0)],
        before_kills: vec![],
    });
    let text = report(&check(&evidence));
    assert!(
        text.contains("1 orders neither confirmed nor returned after healing")
            && text.contains("order o2 of buyer u2 ×1 is held"),
        "{text}"
    );
}

#[test]
fn an_expired_order_in_a_sale_without_holds_is_reported() {
    let mut evidence = good();
    evidence.store.as_mut().unwrap()[1].status = "expired".into();
    let text = report(&check(&evidence));
    assert!(
        text.contains("order o2 of buyer u2 ×1 is expired in a sale without holds"),
        "{text}"
    );
}

#[test]
fn an_expiry_counted_twice_is_reported() {
    let mut evidence = good_holds();
    // Instance 1 expired o2 again after instance 0 had.
    evidence.expiry_counters = Some(ExpiryCounters {
        after_healing: vec![Ok(1), Ok(1), Ok(0)],
        before_kills: vec![(2, Ok(1))],
    });
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [5], "{}", report(&violations));
    assert!(
        violations[0].message.contains(
            "the instances counted 3 expiries (instance 0: 1, instance 1: 1, instance 2: 0, \
             instance 2 before it was killed: 1), but the store has 2 expired orders"
        ),
        "{}",
        report(&violations)
    );
}

#[test]
fn an_unreadable_expiry_counter_is_reported() {
    let mut evidence = good_holds();
    evidence.expiry_counters = Some(ExpiryCounters {
        after_healing: vec![Ok(1), Err("connection refused".into()), Ok(0)],
        before_kills: vec![(2, Err("timed out".into()))],
    });
    let violations = check(&evidence);
    assert_eq!(invariants(&violations), [5], "{}", report(&violations));
    assert!(
        violations[0]
            .message
            .contains("expired counter of instance 1 could not be read: connection refused"),
        "{}",
        report(&violations)
    );
}
