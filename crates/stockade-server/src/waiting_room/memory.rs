//! Queues in this process: the embedded default (one instance).
//!
//! Every ticket has a sequence number, and the queue is admitted strictly
//! from its front, so a waiting ticket's position is its number minus the
//! numbers already admitted: O(1). Early joiners (before the start) wait
//! in a list in join order (their provisional positions) and are shuffled
//! once, when the sale starts, before any later join or admission; their
//! numbers are then handed out in the shuffled order.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

use async_trait::async_trait;
use parking_lot::Mutex;
use rand::seq::SliceRandom;
use stockade_core::{SaleId, UserId};

use super::spend::SpendRecords;
use super::{
    CloseReason, JoinOutcome, QueueBackend, QueueError, Tick, TickReport, TicketId, TicketState,
    TicketView,
};

/// Every room of this process.
#[derive(Debug, Default)]
pub struct MemoryQueues {
    rooms: Mutex<HashMap<SaleId, Room>>,
    registered: Mutex<HashSet<SaleId>>,
    spends: Mutex<SpendRecords>,
}

impl MemoryQueues {
    /// No rooms yet.
    pub fn new() -> Self {
        Self::default()
    }
}

#[derive(Debug)]
enum Place {
    /// Before the draw: index in the early joiners' list.
    Early(u64),
    /// After it: sequence number (1 is the first ever admitted).
    Numbered(u64),
}

#[derive(Debug)]
enum State {
    Waiting(Place),
    Admitted { until_ms: i64 },
}

#[derive(Debug)]
struct Ticket {
    user: UserId,
    generation: u64,
    state: State,
}

#[derive(Debug, Default)]
struct Room {
    /// Bumped when the queue closes: tickets of older generations that
    /// were still waiting are closed.
    generation: u64,
    close_reasons: HashMap<u64, CloseReason>,
    closed: Option<CloseReason>,
    credit: f64,
    last_ms: Option<i64>,
    early: Vec<TicketId>,
    drawn: bool,
    /// Numbers handed out, and admitted (all from the front).
    numbered: u64,
    admitted_count: u64,
    waiting: VecDeque<TicketId>,
    /// Outstanding admissions: (expiry, ticket).
    outstanding: BTreeSet<(i64, TicketId)>,
    /// Admissions used by purchases so far.
    used: u64,
    tickets: HashMap<TicketId, Ticket>,
    users: HashMap<UserId, TicketId>,
}

impl Room {
    fn view(&self, id: &TicketId, now_ms: i64) -> Option<TicketView> {
        let ticket = self.tickets.get(id)?;
        let state = match &ticket.state {
            State::Admitted { until_ms } if *until_ms > now_ms => TicketState::Admitted {
                until_ms: *until_ms,
            },
            State::Admitted { .. } => TicketState::Closed(CloseReason::AdmissionExpired),
            State::Waiting(_) if ticket.generation != self.generation => TicketState::Closed(
                self.close_reasons
                    .get(&ticket.generation)
                    .copied()
                    .unwrap_or(CloseReason::SoldOut),
            ),
            State::Waiting(Place::Early(index)) => TicketState::Waiting {
                position: index + 1,
            },
            State::Waiting(Place::Numbered(number)) => TicketState::Waiting {
                position: number - self.admitted_count,
            },
        };
        Some(TicketView {
            ticket: id.clone(),
            user: ticket.user.clone(),
            state,
        })
    }

    /// Shuffles the early joiners once the sale has started.
    fn draw(&mut self) {
        if self.drawn {
            return;
        }
        self.drawn = true;
        let mut early = std::mem::take(&mut self.early);
        stockade_core::entropy::with_rng(|rng| early.shuffle(rng));
        for id in early {
            self.numbered += 1;
            if let Some(ticket) = self.tickets.get_mut(&id) {
                ticket.state = State::Waiting(Place::Numbered(self.numbered));
            }
            self.waiting.push_back(id);
        }
    }

    fn close(&mut self, reason: CloseReason) {
        self.close_reasons.insert(self.generation, reason);
        self.generation += 1;
        self.closed = Some(reason);
        self.admitted_count += self.waiting.len() as u64;
        self.waiting.clear();
        self.early.clear();
    }
}

fn missing_ticket(ticket: &TicketId) -> QueueError {
    QueueError::Failed(format!("ticket {ticket} vanished from its room"))
}

#[async_trait]
impl QueueBackend for MemoryQueues {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn join(
        &self,
        fresh: &TicketId,
        now_ms: i64,
        prequeue: bool,
    ) -> Result<JoinOutcome, QueueError> {
        let user = &fresh
            .user()
            .ok_or_else(|| QueueError::Failed(format!("ticket {fresh} names no readable buyer")))?;
        let sale = &fresh.sale();
        let mut rooms = self.rooms.lock();
        let room = rooms.entry(sale.clone()).or_default();
        // Once drawn, the pre-queue is over whatever the caller's clock says.
        let prequeue = prequeue && !room.drawn;
        if !prequeue {
            room.draw();
        }
        if let Some(existing) = room.users.get(user)
            && let Some(view) = room.view(existing, now_ms)
            && !matches!(view.state, TicketState::Closed(_))
        {
            return Ok(JoinOutcome::Joined {
                view,
                created: false,
            });
        }
        if let Some(reason) = room.closed {
            return Ok(JoinOutcome::Closed(reason));
        }
        // The buyer's closed ticket, superseded by the fresh one: pruned, so
        // a room holds one ticket record per buyer at most.
        if let Some(old) = room.users.get(user).cloned() {
            room.tickets.remove(&old);
        }
        let id = fresh.clone();
        let place = if prequeue {
            room.early.push(id.clone());
            Place::Early(room.early.len() as u64 - 1)
        } else {
            room.numbered += 1;
            room.waiting.push_back(id.clone());
            Place::Numbered(room.numbered)
        };
        room.tickets.insert(
            id.clone(),
            Ticket {
                user: user.clone(),
                generation: room.generation,
                state: State::Waiting(place),
            },
        );
        room.users.insert(user.clone(), id.clone());
        let view = room.view(&id, now_ms).ok_or_else(|| missing_ticket(&id))?;
        Ok(JoinOutcome::Joined {
            view,
            created: true,
        })
    }

    /// `restore` changes nothing here: this backend's queues die only with
    /// the process, and with them the one instance that served them.
    async fn ticket(
        &self,
        ticket: &TicketId,
        now_ms: i64,
        _restore: bool,
    ) -> Result<Option<TicketView>, QueueError> {
        let rooms = self.rooms.lock();
        Ok(rooms
            .get(&ticket.sale())
            .and_then(|room| room.view(ticket, now_ms)))
    }

    async fn tick(&self, sale: &SaleId, tick: &Tick) -> Result<TickReport, QueueError> {
        let mut rooms = self.rooms.lock();
        let room = rooms.entry(sale.clone()).or_default();
        if room.closed != Some(CloseReason::Ended) {
            if tick.ended {
                room.close(CloseReason::Ended);
            } else if tick.sold_out {
                if room.closed != Some(CloseReason::SoldOut) {
                    room.close(CloseReason::SoldOut);
                }
            } else if tick.remaining > 0 && room.closed == Some(CloseReason::SoldOut) {
                room.closed = None;
            }
        }
        while let Some(first) = room.outstanding.first()
            && first.0 <= tick.expired_before_ms
        {
            room.outstanding.pop_first();
        }
        let mut report = TickReport {
            closed: room.closed,
            ..TickReport::default()
        };
        if room.closed.is_some() || !tick.started {
            report.outstanding = room.outstanding.len() as u64;
            report.waiting = (room.waiting.len() + room.early.len()) as u64;
            return Ok(report);
        }
        room.draw();
        let mut credit = if room.last_ms.is_some() {
            room.credit
        } else {
            1.0
        };
        if let Some(last) = room.last_ms
            && tick.now_ms > last
        {
            credit = (credit
                + (tick.now_ms - last) as f64 * f64::from(tick.config.admit_per_second) / 1_000.0)
                .min(tick.config.burst());
        }
        room.last_ms = Some(room.last_ms.map_or(tick.now_ms, |l| l.max(tick.now_ms)));
        let used_since = room.used.saturating_sub(tick.used_before);
        let room_left = tick
            .config
            .cap(tick.remaining)
            .saturating_sub(room.outstanding.len() as u64 + used_since);
        let count = (credit.floor() as u64)
            .min(room_left)
            .min(room.waiting.len() as u64);
        let until_ms = tick.now_ms + tick.config.ttl_ms();
        for _ in 0..count {
            let id = room.waiting.pop_front().expect("counted");
            room.admitted_count += 1;
            let ticket = room
                .tickets
                .get_mut(&id)
                .ok_or_else(|| missing_ticket(&id))?;
            ticket.state = State::Admitted { until_ms };
            room.outstanding.insert((until_ms, id.clone()));
            report.admitted.push(id);
        }
        room.credit = credit - count as f64;
        report.outstanding = room.outstanding.len() as u64;
        report.waiting = room.waiting.len() as u64;
        Ok(report)
    }

    async fn consume(&self, ticket: &TicketId) -> Result<(), QueueError> {
        let mut rooms = self.rooms.lock();
        if let Some(room) = rooms.get_mut(&ticket.sale())
            && let Some(Ticket {
                state: State::Admitted { until_ms },
                ..
            }) = room.tickets.get(ticket)
        {
            let key = (*until_ms, ticket.clone());
            if room.outstanding.remove(&key) {
                room.used += 1;
            }
        }
        Ok(())
    }

    async fn reserve_admission(
        &self,
        ticket: &TicketId,
        held: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> Result<Option<String>, QueueError> {
        Ok(self.spends.lock().reserve(ticket, held, until_ms, now_ms))
    }

    async fn settle_admission(
        &self,
        ticket: &TicketId,
        held: &str,
        spent: Option<&str>,
    ) -> Result<(), QueueError> {
        self.spends.lock().settle(ticket, held, spent);
        Ok(())
    }

    async fn used(&self, sale: &SaleId) -> Result<u64, QueueError> {
        Ok(self.rooms.lock().get(sale).map_or(0, |room| room.used))
    }

    async fn register(&self, sale: &SaleId) -> Result<(), QueueError> {
        self.registered.lock().insert(sale.clone());
        Ok(())
    }

    async fn rooms(&self) -> Result<Vec<SaleId>, QueueError> {
        Ok(self.registered.lock().iter().cloned().collect())
    }

    async fn retire(&self, sale: &SaleId) -> Result<(), QueueError> {
        self.registered.lock().remove(sale);
        Ok(())
    }

    async fn forget(&self, sale: &SaleId, after: std::time::Duration) -> Result<(), QueueError> {
        if after.is_zero() {
            self.registered.lock().remove(sale);
            self.rooms.lock().remove(sale);
        }
        Ok(())
    }
}
