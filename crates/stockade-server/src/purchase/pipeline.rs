//! [`Purchases::decide`]: the steps of a purchase, in order.
//!
//! Traced (see [`crate::telemetry`]) as a `purchase` span, child of the
//! request's, with a span per step: `route`, `gate` (the engine's call, or
//! the store's when it decides), `settle` (the writer and the store's
//! verdict) and `replay`. The request span is handed down to the engine
//! and the writer, whose batch spans link to it.

use crate::sale_book::OrderTerms;
use chrono::{DateTime, Utc};
use stockade_core::{Durability, Judged, Order, OrderId, Purchase, PurchaseOutcome, SaleId};
use stockade_store::authority::Authority;
use tracing::field::{Empty, display};
use tracing::{Instrument as _, Span};

use super::gate::{decider, gate};
use super::route::{fresh_route, known_route, to_fallback, while_rebuilding};
use super::settle::{Accepted, settle};
use super::turn::{Run, Turn};
use super::{Answered, Attempt, Decision, PurchaseError, replay};
use crate::recovery::request_rebuild;
use crate::state::AppState;
use crate::waiting_room::door::check_admission;

/// The purchase pipeline of one service.
#[derive(Clone, Copy)]
pub struct Purchases<'a> {
    state: &'a AppState,
}

impl<'a> Purchases<'a> {
    /// The pipeline over `state`.
    pub fn new(state: &'a AppState) -> Self {
        Self { state }
    }

    /// Decides `attempt`: the order it named, or why it named none.
    pub async fn decide(&self, attempt: Attempt) -> Result<Decision, PurchaseError> {
        self.decide_in_turn(attempt, Turn::alone()).await
    }

    /// [`Purchases::decide`] taking its `turn` in a run decided in order
    /// (see [`super::turn`]).
    pub(super) async fn decide_in_turn(
        &self,
        attempt: Attempt,
        mut turn: Turn,
    ) -> Result<Decision, PurchaseError> {
        // The HTTP request's span (this runs inside it): the purchase's
        // span is its child, and the engine's and the writer's batches
        // link to it.
        let request = Span::current();
        let sale = attempt.purchase.sale_id();
        let span = tracing::debug_span!(
            "purchase",
            sale_id = %sale,
            quantity = attempt.purchase.quantity(),
            order_id = Empty,
            answered = Empty,
        );
        if span.is_disabled() {
            return self.decide_in(attempt, &request, &mut turn).await;
        }
        request.record("sale_id", display(sale));
        let decided = self
            .decide_in(attempt, &request, &mut turn)
            .instrument(span.clone())
            .await;
        let (order, answered) = match &decided {
            Ok(decision) => (Some(decision.order_id()), decision.answered()),
            Err(error) => (error.order_id(), Answered::Refused(error.code())),
        };
        if let Some(order) = order {
            span.record("order_id", display(order));
            request.record("order_id", display(order));
        }
        span.record("answered", answered.label());
        decided
    }

    /// [`Purchases::decide`] within its span; `request` is the request's.
    async fn decide_in(
        &self,
        attempt: Attempt,
        request: &Span,
        turn: &mut Turn,
    ) -> Result<Decision, PurchaseError> {
        let state = self.state;
        let purchase = &attempt.purchase;
        let sale = purchase.sale_id();
        match turn.wait().await {
            Run::GoesOn => {}
            // A run decided in order met sold_out before this purchase.
            Run::SoldOut => {
                return Err(PurchaseError::refused(
                    sale,
                    purchase.quantity(),
                    PurchaseOutcome::SoldOut,
                ));
            }
            Run::Stopped => return Err(PurchaseError::RunStopped),
        }
        // One reading of the clock: what this instance knows is judged at
        // it, and an order accepted now is made at it.
        let now = state.clock().now();
        // Without a fallback nothing but the rebuild can sell it: answer
        // before the door and the shedder do any work (with one, see
        // `while_rebuilding`).
        if !state.has_fallback() && state.book().is_rebuilding(sale) {
            return Err(PurchaseError::Rebuilding);
        }
        let keyed = purchase.idempotency_key().is_some();
        if let Some(outcome) = state.book().answer(sale, purchase.tier(), keyed, now) {
            metrics::counter!("stockade_rejections_cached_total", "reason" => outcome.label())
                .increment(1);
            turn.answered(&outcome);
            return Err(PurchaseError::refused(sale, purchase.quantity(), outcome));
        }
        // Reserved for this purchase: spent if it names an order, released
        // if it is refused or fails (see `waiting_room::door`).
        let mut admission = check_admission(state, purchase, &attempt.admission).await?;
        // Held until the answer: the engine call, the commit and its wait.
        let _in_flight = state.shedder().admit()?;
        admission.arm();
        let decided = self
            .admitted(attempt.purchase, attempt.respond_async, now, request, turn)
            .await;
        let names_an_order = match &decided {
            Ok(decision) => decision.answered() != Answered::Duplicate,
            Err(error) => error.names_an_order(),
        };
        admission.settle(names_an_order).await;
        decided
    }

    /// [`Purchases::decide`] once the purchase passed the door and took
    /// its place in flight. A route goes stale when another instance moves
    /// the sale; the answers say so, and the purchase is tried once more on
    /// the fresh route.
    async fn admitted(
        &self,
        mut purchase: Purchase,
        respond_async: bool,
        now: DateTime<Utc>,
        request: &Span,
        turn: &mut Turn,
    ) -> Result<Decision, PurchaseError> {
        let state = self.state;
        let sale = purchase.sale_id().clone();
        let route_span = tracing::debug_span!("route", epoch = Empty, authority = Empty);
        let mut route = async {
            let route = known_route(state, &sale).await?;
            if route.authority == Authority::Primary && state.book().is_rebuilding(&sale) {
                return while_rebuilding(state, &sale, route).await;
            }
            Ok(route)
        }
        .instrument(route_span.clone())
        .await?;
        route_span.record("epoch", route.epoch.get());
        route_span.record("authority", display(route.authority));
        let mut refreshed = false;
        for _ in 0..3 {
            purchase = purchase.at_epoch(route.epoch);
            let ticket = state.book().ticket(&sale);
            let engine = decider(state, route);
            let durability = engine.durability();
            let gate_span = tracing::debug_span!(
                "gate",
                epoch = route.epoch.get(),
                decider = match durability {
                    Durability::Outbox => engine.name(),
                    Durability::Committed => "store",
                },
                outcome = Empty,
            );
            let Some(Judged { outcome, at }) = gate(state, engine, &purchase, now, request)
                .instrument(gate_span.clone())
                .await?
            else {
                // The breaker is open and there is a fallback: move.
                route = to_fallback(state, &sale, route, PurchaseError::EngineUnavailable).await?;
                continue;
            };
            gate_span.record("outcome", outcome.label());
            if !matches!(outcome, PurchaseOutcome::WrongEpoch { .. }) {
                turn.answered(&outcome);
            }
            state.book().learn_outcome(&sale, ticket, &outcome);
            match outcome {
                PurchaseOutcome::WrongEpoch { engine } => {
                    let current = fresh_route(state, &sale)
                        .instrument(tracing::debug_span!("route", fresh = true))
                        .await?;
                    if current != route && !refreshed {
                        refreshed = true;
                        route = current;
                        continue;
                    }
                    // The store agrees with this instance: the engine is
                    // the one out of line (closed for a rebuild elsewhere,
                    // or an old copy). Rebuild it; the lock makes one
                    // instance do it.
                    tracing::info!(%sale, route = %route.epoch, %engine, "engine holds another epoch");
                    request_rebuild(state, &sale, route.epoch, "wrong_epoch");
                    return Err(PurchaseError::Rebuilding);
                }
                PurchaseOutcome::UnknownSale => {
                    return Err(unknown(state, &sale, route, durability).await);
                }
                PurchaseOutcome::Purchased {
                    order_id,
                    remaining,
                } => {
                    metrics::gauge!("stockade_sale_remaining", "sale" => sale.to_string())
                        .set(f64::from(remaining));
                    // Made at the instant the engine judged it, which the
                    // store judges it at when it commits it.
                    let order = accepted(state, &purchase, order_id, at).await?;
                    let accepted = Accepted {
                        order,
                        remaining,
                        route,
                        early: respond_async,
                    };
                    return match durability {
                        // Committed already: an early answer has nothing
                        // to save.
                        Durability::Committed => Ok(Decision::Committed {
                            order: accepted.order,
                            remaining,
                        }),
                        Durability::Outbox => {
                            let span = tracing::debug_span!(
                                "settle",
                                order_id = %accepted.order.id,
                                early = accepted.early,
                                verdict = Empty,
                            );
                            settle(state, &purchase, accepted, request)
                                .instrument(span)
                                .await
                        }
                    };
                }
                PurchaseOutcome::Duplicate { order_id } => {
                    return replay::replay(state, &purchase, order_id, request)
                        .instrument(tracing::debug_span!("replay", order_id = %order_id))
                        .await;
                }
                // Unkeyed, or the engine had every key the store has (the
                // store read it first when it decided itself): a plain
                // refusal, no span and no store work (see `replay::refused`).
                refused if !engine.can_lag_the_store() || purchase.idempotency_key().is_none() => {
                    return Err(PurchaseError::refused(&sale, purchase.quantity(), refused));
                }
                refused => {
                    let span = tracing::debug_span!("replay", refused = refused.label());
                    return replay::refused(state, &purchase, refused, request)
                        .instrument(span)
                        .await;
                }
            }
        }
        Err(PurchaseError::Rebuilding)
    }
}

/// The order an accepted purchase made: made at `at`, the instant the
/// engine judged it at (which the store records and judges it at), of the
/// items the sale's spec resolves, under the sale's payment hold (which the store applies the same way when it
/// commits the order).
async fn accepted(
    state: &AppState,
    purchase: &Purchase,
    id: OrderId,
    at: DateTime<Utc>,
) -> Result<Order, PurchaseError> {
    let terms = terms_of(state, purchase).await?.ok_or_else(|| {
        PurchaseError::Internal(format!(
            "the engine accepted items sale {} refuses",
            purchase.sale_id()
        ))
    })?;
    Ok(Order::accepted(purchase, terms.items, terms.tier, id, at).under_hold(terms.hold))
}

/// What an order of `purchase` holds by its sale's spec (None: its items
/// fit no SKU of the sale). The spec comes from the sale book, which
/// learned it with the route; from the store if the book has let it go.
pub(super) async fn terms_of(
    state: &AppState,
    purchase: &Purchase,
) -> Result<Option<OrderTerms>, PurchaseError> {
    if let Some(terms) = state.book().order_terms(purchase) {
        return Ok(Some(terms));
    }
    let sale = purchase.sale_id();
    let spec = state
        .store()
        .sale_state(sale)
        .await?
        .ok_or_else(|| PurchaseError::Internal(format!("sale {sale} left the store")))?
        .spec;
    state.book().learn_spec(&spec);
    Ok(OrderTerms::of(&spec, purchase))
}

/// The decider does not have the sale. When it is an engine apart from the
/// store and the store has the sale, the engine lost it (Redis restarted
/// empty): rebuild it.
async fn unknown(
    state: &AppState,
    sale: &SaleId,
    route: crate::sale_book::Route,
    durability: Durability,
) -> PurchaseError {
    state.book().forget_route(sale);
    let read = state.book().unknown_ticket();
    if durability == Durability::Outbox {
        match state.store().sale(sale).await {
            Ok(Some(_)) => {
                request_rebuild(state, sale, route.epoch, "engine_lost_sale");
                return PurchaseError::Rebuilding;
            }
            Ok(None) => {}
            Err(error) => return error.into(),
        }
    }
    state.book().learn_unknown(sale, read);
    PurchaseError::UnknownSale(sale.clone())
}
