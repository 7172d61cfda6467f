-- The store as the arbiter (docs/consistency.md). One schema for PostgreSQL
-- and SQLite.
--
-- sales.epoch      bumped, under the sale's row lock, whenever the authority
--                  over the sale's stock changes (an engine rebuilt from the
--                  store, a move to the fallback engine and back); an order
--                  commits only while its epoch is the sale's.
-- sales.authority  'primary' (the configured engine decides purchases) or
--                  'fallback' (the store decides them itself, in PostgreSQL).
-- sales.sold       items held by live orders; with `holdings`, what every
--                  commit checks stock and limits against.
ALTER TABLE sales ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;
ALTER TABLE sales ADD COLUMN authority TEXT NOT NULL DEFAULT 'primary';
ALTER TABLE sales ADD COLUMN sold BIGINT NOT NULL DEFAULT 0;
UPDATE sales SET sold = (
    SELECT COALESCE(SUM(quantity), 0) FROM orders
     WHERE orders.sale_id = sales.id AND orders.status IN ('confirmed', 'held'));

-- Items each buyer holds through live orders.
CREATE TABLE holdings (
    sale_id  TEXT   NOT NULL REFERENCES sales (id),
    user_id  TEXT   NOT NULL,
    quantity BIGINT NOT NULL,
    PRIMARY KEY (sale_id, user_id)
);
INSERT INTO holdings (sale_id, user_id, quantity)
SELECT sale_id, user_id, SUM(quantity) FROM orders
 WHERE status IN ('confirmed', 'held') GROUP BY sale_id, user_id;

-- The epoch an order was decided under. Orders the store refused are kept
-- as status 'void' (without their idempotency key), so that an order id is
-- decided once: committed or void, never both, never twice.
ALTER TABLE orders ADD COLUMN epoch BIGINT NOT NULL DEFAULT 1;

-- Idempotency keys are scoped to their buyer.
DROP INDEX orders_by_key;
CREATE UNIQUE INDEX orders_by_buyer_key ON orders (sale_id, user_id, idempotency_key);

-- Cancelled orders whose items the engine still has to take back, recorded
-- in the cancel's own transaction and deleted once the engine has applied
-- them (or a rebuild under a newer epoch made them moot).
CREATE TABLE pending_releases (
    order_id      TEXT   PRIMARY KEY,
    sale_id       TEXT   NOT NULL REFERENCES sales (id),
    epoch         BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX pending_releases_by_sale ON pending_releases (sale_id);
