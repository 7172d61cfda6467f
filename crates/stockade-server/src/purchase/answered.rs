//! How a purchase was answered: the one label under which the metrics and
//! the activity board count it.

use stockade_api::ErrorCode;

/// How a purchase was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answered {
    /// 201: bought and committed.
    Purchased,
    /// 202: bought, not committed yet (the commit deadline passed, or the
    /// buyer asked for an early answer).
    Pending,
    /// 200 (or 202): an idempotency key replayed.
    Duplicate,
    /// Anything else, by its error code.
    Refused(ErrorCode),
}

/// How the activity board draws an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Items were sold.
    Sold,
    /// A replay: nothing new sold, nothing refused.
    Replayed,
    /// Refused because of the sale or the buyer ([`ErrorCode::is_rejection`]).
    Rejected,
    /// The service could not answer it (overloaded, unavailable, invalid).
    Failed,
}

impl Answered {
    /// The `outcome` label.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Purchased => "purchased",
            Self::Pending => "pending",
            Self::Duplicate => "duplicate",
            Self::Refused(code) => code.as_str(),
        }
    }

    /// The answer labelled `label`, if it is one.
    pub fn parse(label: &str) -> Option<Self> {
        match label {
            "purchased" => Some(Self::Purchased),
            "pending" => Some(Self::Pending),
            "duplicate" => Some(Self::Duplicate),
            other => ErrorCode::parse(other).map(Self::Refused),
        }
    }

    /// How the activity board draws it.
    pub const fn class(self) -> Class {
        match self {
            Self::Purchased | Self::Pending => Class::Sold,
            Self::Duplicate => Class::Replayed,
            Self::Refused(code) if code.is_rejection() => Class::Rejected,
            Self::Refused(_) => Class::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_parses_back() {
        let mut all = vec![Answered::Purchased, Answered::Pending, Answered::Duplicate];
        all.extend(ErrorCode::ALL.iter().copied().map(Answered::Refused));
        for answered in all {
            assert_eq!(Answered::parse(answered.label()), Some(answered));
        }
    }
}
