//! The waiting room of each sale, read from the store once: a sale's room
//! never changes once created.

use std::sync::Arc;

use stockade_core::SaleId;

use super::SaleBook;
use crate::waiting_room::RoomInfo;

impl SaleBook {
    /// The sale's waiting room as read before: None if never read here,
    /// `Some(None)` for a sale without one.
    pub fn room(&self, sale: &SaleId) -> Option<Option<Arc<RoomInfo>>> {
        self.read(sale, |entry| entry.room.clone()).flatten()
    }

    /// Remembers the sale's waiting room (or that it has none).
    pub fn learn_room(&self, sale: &SaleId, room: Option<Arc<RoomInfo>>) {
        self.edit(sale, |entry| entry.room = Some(room));
    }
}
