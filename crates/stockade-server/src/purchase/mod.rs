//! The purchase pipeline.

mod answered;

pub use answered::{Answered, Class};
