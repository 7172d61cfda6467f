-- The order store: the source of truth. One schema for PostgreSQL and
-- SQLite (ids as text, instants as milliseconds since the epoch), so one
-- implementation serves both.

CREATE TABLE sales (
    id             TEXT   PRIMARY KEY,
    total_stock    BIGINT NOT NULL,
    per_user_limit BIGINT NOT NULL,
    starts_at_ms   BIGINT,
    ends_at_ms     BIGINT,
    hold_ms        BIGINT,
    created_at_ms  BIGINT NOT NULL
);

CREATE TABLE orders (
    id              TEXT   PRIMARY KEY,
    sale_id         TEXT   NOT NULL REFERENCES sales (id),
    user_id         TEXT   NOT NULL,
    quantity        BIGINT NOT NULL,
    idempotency_key TEXT,
    status          TEXT   NOT NULL,
    created_at_ms   BIGINT NOT NULL,
    updated_at_ms   BIGINT NOT NULL
);

-- Order ids are UUIDv7 text: sorting by id sorts by time, so paging a
-- sale's orders by id is paging them by creation.
CREATE INDEX orders_by_sale ON orders (sale_id, id);
CREATE UNIQUE INDEX orders_by_key ON orders (sale_id, idempotency_key);
