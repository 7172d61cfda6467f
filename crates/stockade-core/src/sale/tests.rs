//! Sale ids, specs (SKUs, tiers, windows) and snapshots.

use super::*;

#[test]
fn sale_ids_accept_the_alphabet_and_length() {
    assert!(SaleId::new("a").is_ok());
    assert!(SaleId::new("A-z_09").is_ok());
    assert!(SaleId::new("x".repeat(64)).is_ok());
    let too_long = SaleId::new("x".repeat(65)).unwrap_err();
    assert_eq!(too_long.field, "id");
    assert!(SaleId::new("").is_err());
    let braces = SaleId::new("a{b}").unwrap_err();
    assert!(braces.reason.contains("'{'"), "{braces}");
    assert!(SaleId::new("a b").is_err());
    assert!(SaleId::new("é").is_err());
}

#[test]
fn stock_and_limit_bounds() {
    assert!(SaleSpec::builder("s", 0).is_err());
    assert!(SaleSpec::builder("s", 1).is_ok());
    assert!(SaleSpec::builder("s", MAX_TOTAL_STOCK).is_ok());
    assert!(SaleSpec::builder("s", MAX_TOTAL_STOCK + 1).is_err());
    let err = SaleSpec::builder("s", 5)
        .unwrap()
        .per_user_limit(0)
        .unwrap_err();
    assert_eq!(err.field, "per_user_limit");
    let err = SaleSpec::builder("s", 5)
        .unwrap()
        .per_user_limit(MAX_PER_USER_LIMIT + 1)
        .unwrap_err();
    assert_eq!(err.field, "per_user_limit");
    assert!(
        SaleSpec::builder("s", 5)
            .unwrap()
            .per_user_limit(MAX_PER_USER_LIMIT)
            .is_ok()
    );
    assert_eq!(
        SaleSpec::builder("s", 5)
            .unwrap()
            .build()
            .unwrap()
            .per_user_limit(),
        1
    );
}

#[test]
fn window_must_end_after_it_starts() {
    let t = DateTime::<Utc>::from_timestamp(1_000, 0).unwrap();
    let err = SaleSpec::builder("s", 5)
        .unwrap()
        .starts_at(t)
        .ends_at(t)
        .build()
        .unwrap_err();
    assert_eq!(err.field, "ends_at");
}

#[test]
fn snapshot_status_follows_window_then_stock() {
    let start = DateTime::<Utc>::from_timestamp(1_000, 0).unwrap();
    let end = DateTime::<Utc>::from_timestamp(2_000, 0).unwrap();
    let spec = SaleSpec::builder("s", 5)
        .unwrap()
        .starts_at(start)
        .ends_at(end)
        .build()
        .unwrap();
    let at = |secs| DateTime::<Utc>::from_timestamp(secs, 0).unwrap();
    assert_eq!(
        SaleSnapshot::at(spec.clone(), &[5], at(999)).status,
        SaleStatus::Upcoming
    );
    assert_eq!(
        SaleSnapshot::at(spec.clone(), &[5], at(1_000)).status,
        SaleStatus::Open
    );
    assert_eq!(
        SaleSnapshot::at(spec.clone(), &[0], at(1_500)).status,
        SaleStatus::SoldOut
    );
    assert_eq!(
        SaleSnapshot::at(spec.clone(), &[3], at(2_000)).status,
        SaleStatus::Ended
    );
    assert_eq!(SaleSnapshot::at(spec, &[3], at(1_500)).sold, 2);
}

#[test]
fn sale_id_deserialization_validates() {
    assert!(serde_json::from_str::<SaleId>("\"ok-id\"").is_ok());
    assert!(serde_json::from_str::<SaleId>("\"not ok\"").is_err());
}
