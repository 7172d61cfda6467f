-- Shards (issue 21). One schema for PostgreSQL and SQLite.
--
-- sales.shards  over how many shards the Redis engine spreads the sale's
--               stock; the store keeps one count whatever it says, and
--               keeps it for the sale's return to Redis. Rows written before
--               shards read as 1.
ALTER TABLE sales ADD COLUMN shards BIGINT NOT NULL DEFAULT 1;
