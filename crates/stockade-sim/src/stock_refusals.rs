//! A stock refusal is not too soon: a buyer answered `sold_out` or
//! `insufficient_stock` asked for something that did not fit even had
//! every order that could have counted then been live together, with every
//! reserve still holding.
//!
//! The orders that could have counted are the sale's orders in the store
//! (in any status: a held order may have expired since) created no later
//! than the refusal was answered, on the answering instance's clock, plus
//! the slack between two instances' clocks (their offsets and the run's
//! jumps); and every order the store voided (an engine counts such an
//! order until it is rebuilt), whenever it was made. The rule offers no
//! less than that: more orders, or a released reserve, only ever leave
//! more. Not judged in a run where Redis lost writes: an engine may have
//! counted an order the store never had.

use std::collections::BTreeMap;

use crate::history::Judged;
use crate::oracle::Violation;
use crate::scenario::{Fault, MAX_OFFSET_MS, Sale, Scenario};

/// Items of one SKU an order took, and when it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Take {
    /// The SKU (its position).
    pub sku: usize,
    /// The buyer's tier (its position), if any.
    pub tier: Option<usize>,
    /// Items.
    pub quantity: u32,
    /// When it was made (ms since the Unix epoch, on the deciding
    /// instance's clock); None when unknown, and then always counted.
    pub at_ms: Option<i64>,
}

/// Everything the sale's orders ever took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Takes(pub Vec<Take>);

impl Takes {
    /// The store's orders of the sale, and the voided orders (by their
    /// buyer, whose every purchase asks the same items).
    pub fn of(scenario: &Scenario, orders: &[stockade_core::Order], voided: &[String]) -> Self {
        let sale = &scenario.sale;
        let sku_of = |id: &str| sale.skus.iter().position(|s| s.id == id);
        let tier_of = |name: Option<&str>| name.and_then(|n| sale.tier_index(n));
        let mut takes = Vec::new();
        for order in orders {
            let tier = tier_of(order.tier.as_ref().map(|t| t.as_str()));
            for item in &order.items {
                if let Some(sku) = sku_of(item.sku.as_str()) {
                    let at_ms = Some(order.created_at.timestamp_millis());
                    takes.push(Take {
                        sku,
                        tier,
                        quantity: item.quantity,
                        at_ms,
                    });
                }
            }
        }
        for user in voided {
            if let Some(buyer) = scenario.buyers.iter().find(|b| &b.user == user) {
                let tier = tier_of(buyer.tier.as_deref());
                for &(sku, quantity) in &buyer.items {
                    takes.push(Take {
                        sku,
                        tier,
                        quantity,
                        at_ms: None,
                    });
                }
            }
        }
        Takes(takes)
    }

    /// The least a buyer of `tier` was offered of SKU `sku` when the
    /// orders made up to `until_ms` could count: all of them live, the
    /// reserves (of the first SKU) all holding.
    pub fn least_offered(
        &self,
        sale: &Sale,
        sku: usize,
        tier: Option<usize>,
        until_ms: i64,
    ) -> u32 {
        let mut untiered = 0i64;
        let mut by_tier = vec![0i64; sale.tiers.len()];
        for take in &self.0 {
            if take.sku != sku || take.at_ms.is_some_and(|at| at > until_ms) {
                continue;
            }
            match take.tier {
                Some(t) => by_tier[t] += i64::from(take.quantity),
                None => untiered += i64::from(take.quantity),
            }
        }
        let stock = i64::from(sale.skus[sku].stock);
        let reserve = |t: usize| {
            if sku == 0 {
                i64::from(sale.tiers[t].reserved)
            } else {
                0
            }
        };
        let left = stock - untiered - by_tier.iter().sum::<i64>();
        let common = stock
            - untiered
            - (0..by_tier.len())
                .map(|t| by_tier[t].max(reserve(t)))
                .sum::<i64>();
        let own = tier.map_or(0, |t| (reserve(t) - by_tier[t]).max(0));
        u32::try_from((common.max(0) + own).min(left).max(0)).unwrap_or_default()
    }
}

/// How far one instance's clock may read ahead of another's in `scenario`:
/// both offsets, every jump, and a second for drift and the time between
/// a decision and its answer.
pub fn clock_slack_ms(scenario: &Scenario) -> i64 {
    let jumps: i64 = scenario
        .faults
        .iter()
        .map(|(_, fault)| match fault {
            Fault::ClockJump(_, by) => by.abs(),
            _ => 0,
        })
        .sum();
    2 * MAX_OFFSET_MS + jumps + 1_000
}

/// Each `sold_out` or `insufficient_stock` answer to a buyer (of `tiers`,
/// asking `asks`) whose every item fit the least they were offered (see
/// [`Takes::least_offered`]) with the orders made up to its answer and
/// `slack_ms` more.
pub fn premature(
    sale: &Sale,
    takes: &Takes,
    asks: &BTreeMap<String, Vec<(String, u32)>>,
    tiers: &BTreeMap<String, usize>,
    slack_ms: i64,
    answers: &[Judged],
) -> Vec<Violation> {
    answers
        .iter()
        .filter(|a| a.code == "sold_out" || a.code == "insufficient_stock")
        .filter_map(|answer| {
            let tier = tiers.get(&answer.user).copied();
            let ask = asks.get(&answer.user)?;
            let until = answer.answered_ms + slack_ms;
            let mut offered = Vec::new();
            for (id, quantity) in ask {
                let sku = sale.skus.iter().position(|s| &s.id == id)?;
                let least = takes.least_offered(sale, sku, tier, until);
                if *quantity > least {
                    return None;
                }
                offered.push((id.clone(), least));
            }
            Some(format!(
                "buyer {} (tier {tier:?}) was answered {} at {} asking {ask:?}, though with every order made by then live and every reserve holding they were offered {offered:?}",
                answer.user, answer.code, answer.answered_ms
            ))
        })
        .collect()
}

/// Each `insufficient_stock` with 0 left of a sale of one SKU and no
/// tiers: a buyer told "only 0 left" of the only SKU would wait for
/// nothing.
pub fn wrongful_shorts(sale: &Sale, answers: &[Judged]) -> Vec<Violation> {
    if sale.skus.len() != 1 || !sale.tiers.is_empty() {
        return Vec::new();
    }
    answers
        .iter()
        .filter(|a| a.code == "insufficient_stock" && a.remaining == Some(0))
        .map(|a| format!(
            "buyer {} was answered insufficient_stock with 0 left of the sale's only SKU: the sale is sold out and must say sold_out",
            a.user
        ))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 of one SKU, 4 kept for members until 1,000 ms.
    fn sale() -> Sale {
        crate::reserves::tests::sale(Some(1_000))
    }

    fn take(tier: Option<usize>, quantity: u32, at_ms: Option<i64>) -> Take {
        Take {
            sku: 0,
            tier,
            quantity,
            at_ms,
        }
    }

    fn answer(user: &str, code: &str, answered_ms: i64) -> Judged {
        Judged {
            user: user.into(),
            key: String::new(),
            status: 409,
            code: code.into(),
            sent_ms: answered_ms,
            answered_ms,
            instance: 0,
            at_ms: (0, 0),
            repeat: false,
            remaining: None,
        }
    }

    #[test]
    fn the_least_offered_counts_every_order_made_by_then_and_every_reserve() {
        let sale = sale();
        // 3 by buyers of no tier at 100 ms, 1 by a member at 200 ms (a
        // void, time unknown), 5 more of no tier at 5,000 ms.
        let takes = Takes(vec![
            take(None, 3, Some(100)),
            take(Some(0), 1, None),
            take(None, 5, Some(5_000)),
        ]);
        // By 1,000 ms: of no tier, 10 - 3 - max(1, 4) = 3; a member, 3 + (4 - 1).
        assert_eq!(takes.least_offered(&sale, 0, None, 1_000), 3);
        assert_eq!(takes.least_offered(&sale, 0, Some(0), 1_000), 6);
        // By 5,000 ms: nothing of the common stock; a member, their reserve
        // left, within the 1 left of the SKU.
        assert_eq!(takes.least_offered(&sale, 0, None, 5_000), 0);
        assert_eq!(takes.least_offered(&sale, 0, Some(0), 5_000), 1);
    }

    #[test]
    fn a_stock_refusal_that_every_order_made_by_then_explains_is_not_reported() {
        let sale = sale();
        let takes = Takes(vec![take(None, 3, Some(100)), take(None, 3, Some(5_000))]);
        let asks = BTreeMap::from([
            ("early".to_owned(), vec![("s0".to_owned(), 3)]),
            ("late".to_owned(), vec![("s0".to_owned(), 3)]),
            ("member".to_owned(), vec![("s0".to_owned(), 5)]),
        ]);
        let tiers = BTreeMap::from([("member".to_owned(), 0)]);
        let answers = [
            // At 1,000 ms (slack 500): 10 - 3 - 4 = 3 offered, 3 asked.
            answer("early", "sold_out", 1_000),
            // At 6,000 ms: 10 - 6 - 4 = 0 offered.
            answer("late", "insufficient_stock", 6_000),
            // A member at 6,000 ms: 0 + 4 offered, 5 asked.
            answer("member", "insufficient_stock", 6_000),
            answer("early", "limit_exceeded", 1_000),
        ];
        let found = premature(&sale, &takes, &asks, &tiers, 500, &answers);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("buyer early (tier None) was answered sold_out at 1000"));
        // With a slack that reaches the second order, it explains the first
        // refusal too.
        assert!(premature(&sale, &takes, &asks, &tiers, 4_000, &answers).is_empty());
    }
}
