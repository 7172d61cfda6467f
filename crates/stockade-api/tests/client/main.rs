//! The typed client's tests (`cases` against the real service, `canned`
//! against answers it never gives), which need the `client` feature:
//! `scripts/test` builds the workspace with it (the bench turns it on);
//! alone, `cargo nextest run -p stockade-api --features client`. Without
//! the feature this binary fails saying so, rather than passing empty.

#[cfg(feature = "client")]
mod canned;
#[cfg(feature = "client")]
mod cases;

#[cfg(not(feature = "client"))]
#[test]
fn the_client_tests_need_the_client_feature() {
    panic!(
        "the client's tests need its feature: cargo nextest run -p stockade-api --features client"
    );
}
