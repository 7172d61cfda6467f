//! The sale's route (its epoch and authority) as this instance knows it,
//! and the purchase's side of a move to the fallback.

use stockade_core::SaleId;

use super::PurchaseError;
use crate::recovery::{FallbackMove, move_to_fallback};
use crate::sale_book::Route;
use crate::state::AppState;

/// The sale's route as this instance knows it, read from the store the
/// first time (with the sale's spec, which answers its window from then on).
/// Purchases that miss together share one read ([`SaleBook::cold_read_turn`]).
///
/// [`SaleBook::cold_read_turn`]: crate::sale_book::SaleBook::cold_read_turn
pub(super) async fn known_route(state: &AppState, sale: &SaleId) -> Result<Route, PurchaseError> {
    if let Some(route) = state.book().route_with_spec(sale) {
        return Ok(route);
    }
    let _turn = state.book().cold_read_turn(sale).await;
    // Whoever had the turn before may have read it already.
    if let Some(route) = state.book().route_with_spec(sale) {
        return Ok(route);
    }
    if state.book().is_unknown(sale) {
        return Err(PurchaseError::UnknownSale(sale.clone()));
    }
    fresh_route(state, sale).await
}

/// The sale's route as the store has it now. A sale the store does not
/// have is remembered as unknown for a while.
pub(super) async fn fresh_route(state: &AppState, sale: &SaleId) -> Result<Route, PurchaseError> {
    let read = state.book().unknown_ticket();
    let Some(current) = state.store().sale_state(sale).await? else {
        state.book().learn_unknown(sale, read);
        return Err(PurchaseError::UnknownSale(sale.clone()));
    };
    state.book().learn_spec(&current.spec);
    let route = Route {
        epoch: current.epoch,
        authority: current.authority,
    };
    state.book().learn_route(sale, route);
    Ok(route)
}

/// A sale this instance is rebuilding: its purchases wait (503
/// `rebuilding`) unless there is a fallback and no instance has reached
/// the engine lately (the rebuild cannot reach Redis): the fallback then
/// sells it.
pub(super) async fn while_rebuilding(
    state: &AppState,
    sale: &SaleId,
    route: Route,
) -> Result<Route, PurchaseError> {
    if !state.has_fallback() {
        return Err(PurchaseError::Rebuilding);
    }
    to_fallback(state, sale, route, PurchaseError::Rebuilding).await
}

/// Moves the sale to the fallback (see [`move_to_fallback`]); while some
/// instance still reaches the engine, the sale stays and the answer is
/// `refused`.
pub(super) async fn to_fallback(
    state: &AppState,
    sale: &SaleId,
    route: Route,
    refused: PurchaseError,
) -> Result<Route, PurchaseError> {
    match move_to_fallback(state, sale, route.epoch).await? {
        FallbackMove::Routed(route) => Ok(route),
        FallbackMove::Refused => Err(refused),
        FallbackMove::UnknownSale => Err(PurchaseError::UnknownSale(sale.clone())),
    }
}
