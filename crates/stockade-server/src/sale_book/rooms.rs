//! The waiting room of each sale, read from the store once: a sale's room
//! never changes once created.

use std::sync::Arc;

use stockade_core::SaleId;

use super::SaleBook;
use crate::waiting_room::RoomInfo;

/// How a sale's buyers get to buy: directly, through its waiting room, or
/// not at all, for a draw sale (its winners' orders come from the draw).
#[derive(Debug, Clone)]
pub enum Door {
    /// Buyers buy directly.
    Open,
    /// Buyers queue in this waiting room first.
    Room(Arc<RoomInfo>),
    /// Buyers enter the sale's draw.
    Draw,
}

impl SaleBook {
    /// The sale's door as read before: None if never read here.
    pub fn room(&self, sale: &SaleId) -> Option<Door> {
        self.read(sale, |entry| entry.room.clone()).flatten()
    }

    /// Remembers the sale's door.
    pub fn learn_room(&self, sale: &SaleId, door: Door) {
        self.edit(sale, |entry| entry.room = Some(door));
    }
}
