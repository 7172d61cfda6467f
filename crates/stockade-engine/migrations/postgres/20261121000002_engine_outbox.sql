-- The PostgreSQL engine's outbox: orders the engine accepted that the order
-- store has not acknowledged yet. Released orders leave it too.
ALTER TABLE engine_orders ADD COLUMN acknowledged boolean NOT NULL DEFAULT false;
CREATE INDEX engine_orders_outbox ON engine_orders (sale_id, id) WHERE live AND NOT acknowledged;
