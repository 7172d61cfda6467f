//! The typed client's tests: `cases` against the real service, started
//! in-process, and `canned` against answers it never gives.

mod canned;
mod cases;
