-- Authority changes that keep every order named to a client
-- (docs/consistency.md, "Changes of authority").
--
-- sales.undrained_epoch  the primary epoch a move to the fallback left
--                        behind without draining the engine's outbox (the
--                        engine was unreachable): orders decided under it
--                        still commit, judged against stock and limits under
--                        the row lock, until the rebuild back to the
--                        primary has drained that outbox and clears it.
ALTER TABLE sales ADD COLUMN undrained_epoch BIGINT;

-- Each instance's view of the engine: the last time (store clock, ms) it
-- reached it, and the last time it reported at all. A sale moves to the
-- fallback only when no instance has reached the engine for a while, so
-- one instance cut off from Redis never moves a sale the others still sell
-- through Redis.
CREATE TABLE engine_views (
    instance       TEXT   PRIMARY KEY,
    reached_at_ms  BIGINT,
    reported_at_ms BIGINT NOT NULL
);
