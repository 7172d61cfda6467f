-- Each instance also reports which sales its accepted, uncommitted orders
-- belong to (their ids, separated by spaces; NULL from a version that does
-- not say, read as "any sale" while it has orders in flight). A rebuild
-- advances a sale's epoch only once every live instance has reported,
-- after the engine was closed, that none of that sale's orders are left:
-- an order named to a buyer (202 `pending`, 503 with its id) and still on
-- its way to the store is then never voided by the advance
-- (docs/consistency.md, "Changes of authority").
ALTER TABLE engine_views ADD COLUMN in_flight_sales TEXT;
