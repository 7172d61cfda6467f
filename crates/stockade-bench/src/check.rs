//! The correctness check of a run: what the buyers were told, and what the
//! server holds, against the invariants of docs/design.md.
//!
//! Every problem found is reported in words; a run with any problem is
//! broken. Nothing is retried, nothing is hidden.

use crate::driver::Tally;
use crate::strategy::Verification;

/// Everything the check looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Items on sale.
    pub stock: u32,
    /// Distinct buyers who asked.
    pub buyers: u64,
    /// Requests answered "purchased".
    pub purchased: u64,
    /// Buyers told "purchased" more than once.
    pub duplicate_buyers: u64,
    /// Buyers refused as repeat buyers who never bought.
    pub wrongly_refused: u64,
    /// Requests that failed.
    pub failed: u64,
    /// An example failure.
    pub first_failure: Option<String>,
    /// What the server holds afterwards (None if it could not be read).
    pub verification: Option<Verification>,
    /// Why the server could not be read.
    pub verification_error: Option<String>,
}

impl Observed {
    /// The observation of a finished run.
    pub fn new(stock: u32, tally: &Tally, verification: Result<Verification, String>) -> Self {
        let (verification, verification_error) = match verification {
            Ok(verification) => (Some(verification), None),
            Err(error) => (None, Some(error)),
        };
        Self {
            stock,
            buyers: tally.buyers,
            purchased: tally.purchased,
            duplicate_buyers: tally.duplicate_buyers,
            wrongly_refused: tally.wrongly_refused,
            failed: tally.failed,
            first_failure: tally.failure_samples.first().cloned(),
            verification,
            verification_error,
        }
    }

    /// Items sold beyond the stock.
    pub fn oversold(&self) -> u64 {
        self.purchased.saturating_sub(u64::from(self.stock))
    }

    /// What broke, in words; empty when every invariant held.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let stock = u64::from(self.stock);
        let expected = stock.min(self.buyers);
        if self.purchased > stock {
            problems.push(format!(
                "oversold: {} items sold of {stock}",
                self.purchased
            ));
        }
        if self.duplicate_buyers > 0 {
            problems.push(format!(
                "{} buyers got more than one item (limit 1)",
                self.duplicate_buyers
            ));
        }
        if self.purchased < expected {
            problems.push(format!(
                "undersold: {} sold where {expected} should have been ({} buyers, {stock} items)",
                self.purchased, self.buyers
            ));
        }
        if self.wrongly_refused > 0 {
            problems.push(format!(
                "{} buyers were refused as repeat buyers but were never sold anything",
                self.wrongly_refused
            ));
        }
        if self.failed > 0 {
            let example = self
                .first_failure
                .as_deref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default();
            problems.push(format!("{} requests failed{example}", self.failed));
        }
        match (&self.verification, &self.verification_error) {
            (Some(server), _) => {
                let expected_remaining = stock as i64 - self.purchased as i64;
                if server.remaining < 0 {
                    problems.push(format!(
                        "the stored stock is negative: {}",
                        server.remaining
                    ));
                }
                if server.remaining != expected_remaining {
                    problems.push(format!(
                        "stock does not add up: {} left, {stock} − {} sold = {expected_remaining} expected",
                        server.remaining, self.purchased
                    ));
                }
                if let Some(lowest) = server.lowest_stock_seen
                    && lowest < 0
                {
                    problems.push(format!(
                        "the stored stock went negative during the run (down to {lowest})"
                    ));
                }
                if let Some(recorded) = server.recorded_orders
                    && recorded != self.purchased
                {
                    problems.push(format!(
                        "{} purchases acknowledged but the server recorded {recorded}",
                        self.purchased
                    ));
                }
            }
            (None, error) => problems.push(format!(
                "could not read the result back: {}",
                error.as_deref().unwrap_or("unknown error")
            )),
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn correct() -> Observed {
        Observed {
            stock: 100,
            buyers: 150,
            purchased: 100,
            verification: Some(Verification {
                remaining: 0,
                recorded_orders: Some(100),
                lowest_stock_seen: None,
            }),
            ..Observed::default()
        }
    }

    #[test]
    fn a_correct_sale_has_no_problems() {
        assert_eq!(correct().problems(), Vec::<String>::new());
        let fewer_buyers = Observed {
            buyers: 60,
            purchased: 60,
            verification: Some(Verification {
                remaining: 40,
                recorded_orders: Some(60),
                lowest_stock_seen: Some(40),
            }),
            ..correct()
        };
        assert!(fewer_buyers.problems().is_empty());
    }

    #[test]
    fn an_oversell_is_flagged_with_the_numbers() {
        let broken = Observed {
            purchased: 103,
            verification: Some(Verification {
                remaining: -3,
                recorded_orders: Some(103),
                lowest_stock_seen: None,
            }),
            ..correct()
        };
        let problems = broken.problems();
        assert_eq!(broken.oversold(), 3);
        assert!(
            problems.iter().any(|p| p.contains("oversold: 103")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("negative: -3")),
            "{problems:?}"
        );
    }

    #[test]
    fn duplicates_negative_stock_and_lost_orders_are_flagged() {
        let broken = Observed {
            duplicate_buyers: 7,
            verification: Some(Verification {
                remaining: 0,
                recorded_orders: None,
                lowest_stock_seen: Some(-50),
            }),
            ..correct()
        };
        let problems = broken.problems();
        assert!(
            problems
                .iter()
                .any(|p| p.contains("7 buyers got more than one"))
        );
        assert!(problems.iter().any(|p| p.contains("down to -50")));
        let lost = Observed {
            verification: Some(Verification {
                remaining: 0,
                recorded_orders: Some(98),
                lowest_stock_seen: None,
            }),
            ..correct()
        };
        assert!(lost.problems()[0].contains("recorded 98"));
    }

    #[test]
    fn failures_undersell_and_unreadable_results_are_flagged() {
        let broken = Observed {
            purchased: 90,
            failed: 10,
            first_failure: Some("pool timed out".into()),
            wrongly_refused: 2,
            verification: None,
            verification_error: Some("connection refused".into()),
            ..correct()
        };
        let problems = broken.problems();
        assert!(problems.iter().any(|p| p.contains("undersold: 90")));
        assert!(problems.iter().any(|p| p.contains("pool timed out")));
        assert!(problems.iter().any(|p| p.contains("2 buyers were refused")));
        assert!(problems.iter().any(|p| p.contains("connection refused")));
        let wrong_stock = Observed {
            verification: Some(Verification {
                remaining: 5,
                recorded_orders: Some(100),
                lowest_stock_seen: None,
            }),
            ..correct()
        };
        assert!(wrong_stock.problems()[0].contains("does not add up"));
    }
}
