//! Rebuilds the crate when a migration is added or changed: `sqlx::migrate!`
//! embeds `migrations/store` at compile time, and cargo does not otherwise
//! know the directory is an input.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
