-- Each instance also reports how many orders it has accepted from the
-- engine and not yet committed (named to clients or not). A sale moves to
-- the fallback only once every live instance has reported, after its last
-- contact with the engine, that none are left: the fallback then never
-- sells the stock of an order that was named before the move and commits
-- after it (docs/consistency.md, "Changes of authority").
ALTER TABLE engine_views ADD COLUMN in_flight BIGINT NOT NULL DEFAULT 0;
