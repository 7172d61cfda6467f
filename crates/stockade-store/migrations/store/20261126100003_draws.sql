-- Draw sales (issue 20): entries during a window, then a draw anyone can
-- recompute. One schema for PostgreSQL and SQLite.
--
-- draws.seed         the draw's secret, hex; published (with the order of
--                    the entries) only once drawn_at is set. Its SHA-256,
--                    `commitment`, is public from the sale's creation.
-- draws.lease_owner  the instance running the draw or its roll-down now,
--   .lease_until_ms  until then (store clock, ms): another instance takes
--                    over once the lease has run out, so the draw runs
--                    exactly once though an instance dies mid-draw.
-- draws.settled_at_ms  when the last waitlisted entries were told they lost
--                    (no hold can roll down any more).
CREATE TABLE draws (
    sale_id             TEXT   PRIMARY KEY REFERENCES sales (id),
    entries_open_at_ms  BIGINT NOT NULL,
    entries_close_at_ms BIGINT NOT NULL,
    seed                TEXT   NOT NULL,
    commitment          TEXT   NOT NULL,
    drawn_at_ms         BIGINT,
    settled_at_ms       BIGINT,
    lease_owner         TEXT,
    lease_until_ms      BIGINT
);

-- One entry per buyer and sale. `id` is random (the published list of
-- entries names no buyer); `position` is its place in the draw's order.
CREATE TABLE draw_entries (
    id            TEXT   PRIMARY KEY,
    sale_id       TEXT   NOT NULL REFERENCES sales (id),
    user_id       TEXT   NOT NULL,
    items         TEXT   NOT NULL,
    tier          TEXT,
    created_at_ms BIGINT NOT NULL,
    position      BIGINT,
    result        TEXT   NOT NULL,
    order_id      TEXT
);
CREATE UNIQUE INDEX draw_entries_by_buyer ON draw_entries (sale_id, user_id);
CREATE INDEX draw_entries_by_position ON draw_entries (sale_id, position);
