//! Reading the scripts' replies, and Redis's errors as the queue's.

use redis::Value;

use super::super::{CloseReason, QueueError, TicketId, TicketState};

pub(super) fn redis_error(error: redis::RedisError) -> QueueError {
    if error.is_timeout()
        || error.is_io_error()
        || error.is_connection_refusal()
        || error.is_connection_dropped()
    {
        QueueError::Unavailable(error.to_string())
    } else {
        QueueError::Failed(error.to_string())
    }
}

/// A ticket whose buyer part does not decode: the caller passed one this
/// service did not mint.
pub(super) fn unreadable(ticket: &TicketId) -> QueueError {
    QueueError::Failed(format!("ticket {ticket} names no readable buyer"))
}

pub(super) fn malformed(script: &str, reply: &[Value]) -> QueueError {
    QueueError::Failed(format!("{script} gave a malformed reply: {reply:?}"))
}

pub(super) fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

pub(super) fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

/// `{state, value, user}` of view.lua.
pub(super) fn state(state: &Value, value: &Value) -> Option<TicketState> {
    match text(state)?.as_str() {
        "waiting" => Some(TicketState::Waiting {
            position: u64::try_from(int(value)?).ok()?,
        }),
        "admitted" => Some(TicketState::Admitted {
            until_ms: int(value)?,
        }),
        "closed" => Some(TicketState::Closed(CloseReason::parse(&text(value)?)?)),
        _ => None,
    }
}
