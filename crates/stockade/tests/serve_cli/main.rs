//! `stockade serve`'s rough edges as a newcomer meets them (issue 12,
//! item 6): nothing is announced before the service can serve; a refused
//! Redis or a bad database URL is one error, once, quickly, naming
//! host:port and never a password; settings are named the way they were
//! given; `--help` lists every setting; logs carry colour only on a
//! terminal and come as JSON on request.

mod database;
mod helpers;
mod logs;
mod secrets;
mod settings;
mod startup;
