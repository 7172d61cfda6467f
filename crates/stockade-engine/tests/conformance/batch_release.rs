//! `release_many`: many releases of one sale in one call answer exactly
//! what one call each would have, in order.

use stockade_core::{
    Engine, Epoch, OrderId, Purchase, PurchaseOutcome, ReleaseOutcome, SaleId, SaleSpec, UserId,
};

use crate::harness::Harness;

async fn buy(engine: &dyn Engine, user: &str, quantity: u32) -> OrderId {
    match engine
        .purchase(&Purchase::new("batch", user, quantity).unwrap())
        .await
        .unwrap()
    {
        PurchaseOutcome::Purchased { order_id, .. } => order_id,
        other => panic!("{other:?}"),
    }
}

pub async fn releases_in_one_call_are_each_decided_as_alone(h: &Harness) {
    let e = h.engine.as_ref();
    let sale = SaleId::new("batch").unwrap();
    let spec = SaleSpec::builder("batch", 10)
        .unwrap()
        .per_user_limit(5)
        .unwrap()
        .build()
        .unwrap();
    e.create_sale(&spec).await.unwrap();
    let a = buy(e, "ann", 2).await;
    let b = buy(e, "bob", 3).await;
    let c = buy(e, "ann", 1).await;
    let kept = buy(e, "cat", 1).await;
    assert_eq!(e.snapshot(&sale).await.unwrap().unwrap().remaining, 3);
    let first = Epoch::FIRST;
    let unknown = OrderId::generate();
    let outcomes = e
        .release_many(
            &sale,
            &[
                (a, first),
                (b, Epoch::new(7)),
                (a, first),
                (unknown, first),
                (c, first),
                (b, first),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        outcomes,
        vec![
            ReleaseOutcome::Released {
                quantity: 2,
                remaining: 5
            },
            ReleaseOutcome::WrongEpoch { engine: first },
            ReleaseOutcome::AlreadyReleased,
            ReleaseOutcome::UnknownOrder,
            ReleaseOutcome::Released {
                quantity: 1,
                remaining: 6
            },
            ReleaseOutcome::Released {
                quantity: 3,
                remaining: 9
            },
        ]
    );
    assert_eq!(e.snapshot(&sale).await.unwrap().unwrap().remaining, 9);
    let ann = UserId::new("ann").unwrap();
    assert_eq!(e.purchased_by(&sale, &ann).await.unwrap(), 0);
    assert_eq!(
        e.purchased_by(&sale, &UserId::new("cat").unwrap())
            .await
            .unwrap(),
        1
    );
    // Again: nothing changes.
    let again = e
        .release_many(&sale, &[(a, first), (b, first)])
        .await
        .unwrap();
    assert_eq!(again, vec![ReleaseOutcome::AlreadyReleased; 2]);
    assert!(e.release_many(&sale, &[]).await.unwrap().is_empty());
    // An unknown sale answers each.
    let nowhere = SaleId::new("nowhere").unwrap();
    assert_eq!(
        e.release_many(&nowhere, &[(kept, first), (a, first)])
            .await
            .unwrap(),
        vec![ReleaseOutcome::UnknownSale; 2]
    );
    assert_eq!(e.snapshot(&sale).await.unwrap().unwrap().remaining, 9);
}
