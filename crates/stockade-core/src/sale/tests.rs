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

#[test]
fn shards_are_bounded_and_need_one_sku_without_tiers() {
    let spec = SaleSpec::builder("s", 10)
        .unwrap()
        .shards(3)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(spec.shards(), 3);
    assert_eq!(
        SaleSpec::builder("s", 10)
            .unwrap()
            .build()
            .unwrap()
            .shards(),
        1
    );
    for bad in [0, MAX_SHARDS + 1] {
        let err = SaleSpec::builder("s", 100)
            .unwrap()
            .shards(bad)
            .unwrap_err();
        assert_eq!(err.field, "shards", "{bad}");
    }
    let more_shards_than_items = SaleSpec::builder("s", 2)
        .unwrap()
        .shards(3)
        .unwrap()
        .build()
        .unwrap_err();
    assert!(
        more_shards_than_items.reason.contains("every shard"),
        "{more_shards_than_items}"
    );
    let skus = vec![
        SkuSpec {
            id: SkuId::new("a").unwrap(),
            stock: 5,
        },
        SkuSpec {
            id: SkuId::new("b").unwrap(),
            stock: 5,
        },
    ];
    let err = SaleSpec::with_skus("s", skus)
        .unwrap()
        .shards(2)
        .unwrap()
        .build()
        .unwrap_err();
    assert!(err.reason.contains("one SKU"), "{err}");
}

#[test]
fn a_buyer_always_meets_the_same_shard_and_buyers_spread() {
    let spec = SaleSpec::builder("s", 1000)
        .unwrap()
        .shards(4)
        .unwrap()
        .build()
        .unwrap();
    let mut per_shard = [0u32; 4];
    for n in 0..4000 {
        let user = crate::UserId::new(format!("user-{n}")).unwrap();
        let shard = spec.shard_of(&user);
        assert_eq!(shard, spec.shard_of(&user));
        per_shard[usize::from(shard)] += 1;
    }
    // Fixed values: the hash must never change between versions, or a
    // rolling upgrade would send a buyer to another shard.
    assert_eq!(shard_of("alice", 4), shard_of("alice", 4));
    assert_eq!(
        [shard_of("alice", 7), shard_of("bob", 7), shard_of("", 7)],
        [1, 2, 2]
    );
    for count in per_shard {
        assert!((800..1200).contains(&count), "{per_shard:?}");
    }
}

#[test]
fn specs_stored_before_shards_read_as_one_shard() {
    let spec = SaleSpec::builder("s", 10).unwrap().build().unwrap();
    let mut json = serde_json::to_value(&spec).unwrap();
    json.as_object_mut().unwrap().remove("shards");
    let read: SaleSpec = serde_json::from_value(json).unwrap();
    assert_eq!(read.shards(), 1);
    assert_eq!(read, spec);
}
