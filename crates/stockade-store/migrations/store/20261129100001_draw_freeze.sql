-- Draws freeze their entry set before the first purchase (issue 35).
--
-- draws.frozen_at_ms  when the draw's run froze the entries (store clock,
--                     ms): from then on no entry is inserted, and every
--                     entry has its `position` in the draw's order. A
--                     re-run (after a crash or a lost lease) reads the
--                     stored positions and never the set again.
-- draws.entry_digest  the SHA-256, hex, of the frozen entry ids sorted by
--                     their bytes, each followed by a newline: published
--                     with the draw, so an auditor checks the list of
--                     entries they were given is the one that was drawn.
ALTER TABLE draws ADD COLUMN frozen_at_ms BIGINT;
ALTER TABLE draws ADD COLUMN entry_digest TEXT;
