//! A crowd at once: joins and polls that arrive together (and, in Redis,
//! share one call) are each answered as if they had come one by one.

use std::collections::{HashMap, HashSet};

use futures::future::join_all;
use stockade_server::waiting_room::{JoinOutcome, QueueBackend, TicketId, TicketState};

use super::helpers::{T0, fresh, sale, user};

/// Buyers in the crowd.
const CROWD: usize = 300;
/// The first this many buyers send their join twice, at the same moment.
const TWICE: usize = 60;

pub async fn a_crowd_joining_and_polling_at_once_is_answered_as_if_one_by_one(
    backend: &dyn QueueBackend,
) {
    let drop = sale("crowd");
    let who: Vec<usize> = (0..CROWD).chain(0..TWICE).collect();
    let joins = who.iter().map(|&i| {
        let ticket = fresh(&drop, i, T0, false);
        async move { (i, backend.join(&ticket, T0, false).await.unwrap()) }
    });
    let mut tickets: HashMap<usize, TicketId> = HashMap::new();
    let mut created = 0;
    for (i, outcome) in join_all(joins).await {
        let JoinOutcome::Joined { view, created: new } = outcome else {
            panic!("the queue closed for buyer {i}");
        };
        assert_eq!(
            view.user,
            user(i),
            "buyer {i} was answered another's ticket"
        );
        assert!(matches!(view.state, TicketState::Waiting { .. }));
        created += usize::from(new);
        match tickets.get(&i) {
            // The buyer's second join: the same ticket, not a new one.
            Some(first) => assert_eq!(&view.ticket, first, "buyer {i} holds two tickets"),
            None => {
                tickets.insert(i, view.ticket);
            }
        }
    }
    assert_eq!(
        created, CROWD,
        "one ticket per buyer, whatever joined twice"
    );
    // Polled all at once: the positions are 1..=CROWD, in the order of the
    // tickets' places, each ticket its own buyer's.
    let polls = tickets.iter().map(|(&i, ticket)| async move {
        let view = backend.ticket(ticket, T0 + 1, false).await.unwrap();
        (i, ticket.place(), view.expect("a ticket the room issued"))
    });
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for (i, place, view) in join_all(polls).await {
        assert_eq!(view.user, user(i));
        assert_eq!(&view.ticket, &tickets[&i]);
        let TicketState::Waiting { position } = view.state else {
            panic!("buyer {i} is not waiting: {:?}", view.state);
        };
        seen.push((place, position));
    }
    seen.sort_unstable();
    let positions: Vec<u64> = seen.iter().map(|&(_, position)| position).collect();
    assert_eq!(positions, (1..=CROWD as u64).collect::<Vec<_>>());
    // Unknown tickets polled in the same crowd are unknown, and change
    // nothing for the others.
    let strangers = (0..20).map(|k| fresh(&drop, 10_000 + k, T0, false));
    let unknown = join_all(
        strangers.map(|t| async move { backend.ticket(&t, T0 + 2, false).await.unwrap() }),
    )
    .await;
    assert!(unknown.iter().all(Option::is_none));
    let distinct: HashSet<_> = tickets.values().collect();
    assert_eq!(distinct.len(), CROWD);
}
