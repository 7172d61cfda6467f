-- Buyer tiers (issue 20). One schema for PostgreSQL and SQLite.
--
-- sales.tiers                   the tiers as JSON (name, reserved items,
--                               per_user_limit, starts_at); NULL: none.
-- sales.release_reserved_at_ms  when unsold reserved stock joins the common
--                               stock; NULL: never.
-- sales.tier_sold               for a sale with tiers, the items of each SKU
--                               each tier's buyers hold, JSON [[n, ...], ...]
--                               in the tiers' and SKUs' order; NULL without
--                               tiers.
-- orders.tier                   the buyer's tier, when one of the sale's.
ALTER TABLE sales ADD COLUMN tiers TEXT;
ALTER TABLE sales ADD COLUMN release_reserved_at_ms BIGINT;
ALTER TABLE sales ADD COLUMN tier_sold TEXT;
ALTER TABLE orders ADD COLUMN tier TEXT;
