-- Tables of the hand-written PostgreSQL strategies (`pg-for-update`,
-- `pg-conditional`), the schema a team following the founding articles would
-- write: a sale row whose stock may never go negative, and one order per
-- (sale, buyer).
CREATE TABLE IF NOT EXISTS stockade_bench_sales (
    id        text    PRIMARY KEY,
    total     integer NOT NULL,
    remaining integer NOT NULL CHECK (remaining >= 0)
);

CREATE TABLE IF NOT EXISTS stockade_bench_orders (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sale_id    text        NOT NULL REFERENCES stockade_bench_sales (id) ON DELETE CASCADE,
    user_id    text        NOT NULL,
    quantity   integer     NOT NULL CHECK (quantity >= 1),
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (sale_id, user_id)
);
