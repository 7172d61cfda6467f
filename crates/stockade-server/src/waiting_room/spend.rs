//! Spend records of admission tokens in this process (the memory
//! backend's; Redis keeps one key per ticket with a TTL, see
//! `lua/reserve_admission.lua`). Each record lives until its token can no
//! longer be used; expired records are dropped as new ones come, so memory
//! follows the admissions live at once.

use std::collections::{BTreeSet, HashMap};

use super::TicketId;

/// Spend records by ticket, with their expiry.
#[derive(Debug, Default)]
pub struct SpendRecords {
    records: HashMap<TicketId, (String, i64)>,
    by_expiry: BTreeSet<(i64, TicketId)>,
}

impl SpendRecords {
    /// Records `held` for `ticket` until `until_ms` unless a live record is
    /// there; None when recorded, else the record found.
    pub fn reserve(
        &mut self,
        ticket: &TicketId,
        held: &str,
        until_ms: i64,
        now_ms: i64,
    ) -> Option<String> {
        self.forget_expired(now_ms);
        if let Some((record, _)) = self.records.get(ticket) {
            return Some(record.clone());
        }
        self.records
            .insert(ticket.clone(), (held.to_owned(), until_ms));
        self.by_expiry.insert((until_ms, ticket.clone()));
        None
    }

    /// Replaces `held` with `spent`, or removes it (None).
    pub fn settle(&mut self, ticket: &TicketId, held: &str, spent: Option<&str>) {
        let Some((record, until_ms)) = self.records.get_mut(ticket) else {
            return;
        };
        if record != held {
            return;
        }
        match spent {
            Some(spent) => *record = spent.to_owned(),
            None => {
                let key = (*until_ms, ticket.clone());
                self.records.remove(ticket);
                self.by_expiry.remove(&key);
            }
        }
    }

    fn forget_expired(&mut self, now_ms: i64) {
        while let Some((until_ms, ticket)) = self.by_expiry.first().cloned() {
            if until_ms > now_ms {
                break;
            }
            self.by_expiry.pop_first();
            self.records.remove(&ticket);
        }
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use stockade_core::SaleId;

    use super::*;

    #[test]
    fn a_ticket_is_reserved_once_settled_and_forgotten_when_it_expires() {
        let sale = SaleId::new("s").unwrap();
        let signer = super::super::token::AdmissionSigner::new(b"spend records test secret.......");
        let ticket = signer.mint_ticket(&sale, 1, &stockade_core::UserId::new("u1").unwrap());
        let mut records = SpendRecords::default();
        assert_eq!(records.reserve(&ticket, "held:1", 1_000, 0), None);
        assert_eq!(
            records.reserve(&ticket, "held:2", 1_000, 0),
            Some("held:1".into())
        );
        // Another reservation's settle changes nothing.
        records.settle(&ticket, "held:2", None);
        assert_eq!(
            records.reserve(&ticket, "held:3", 1_000, 0),
            Some("held:1".into())
        );
        records.settle(&ticket, "held:1", None);
        assert_eq!(records.reserve(&ticket, "held:4", 1_000, 0), None);
        records.settle(&ticket, "held:4", Some("spent:"));
        assert_eq!(
            records.reserve(&ticket, "held:5", 1_000, 999),
            Some("spent:".into())
        );
        // Expired: forgotten (its token is refused by then anyway).
        let other = signer.mint_ticket(&sale, 2, &stockade_core::UserId::new("u2").unwrap());
        assert_eq!(records.reserve(&other, "held:6", 2_000, 1_000), None);
        assert_eq!(records.len(), 1);
    }
}
