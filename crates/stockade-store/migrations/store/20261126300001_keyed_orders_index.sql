-- Only orders with an idempotency key are in the buyer-key index. A NULL
-- key never conflicted, so the uniqueness it enforces is the same; and a
-- buyer id is a random key of the index, so each keyless order used to
-- dirty a page of it of its own, which the commit then wrote to the WAL
-- (SQLite) or to disk. Lookups by key (`idempotency_key = ...`) imply the
-- key is not NULL, so both databases still use the index for them.
DROP INDEX orders_by_buyer_key;
CREATE UNIQUE INDEX orders_by_buyer_key ON orders (sale_id, user_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
