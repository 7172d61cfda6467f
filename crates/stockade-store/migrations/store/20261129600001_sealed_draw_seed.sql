-- A draw's seed sealed until its entry set is frozen (issue 35, item 2).
-- One schema for PostgreSQL and SQLite: SQLite cannot drop a column's NOT
-- NULL, so the table is rebuilt with every row copied.
--
-- draws.nonce  random, hex: the seed is HMAC-SHA256(draw key, sale id ‖
--              nonce), and the draw key is a secret of the instances the
--              store does not hold. A new draw has a nonce and no seed.
-- draws.seed   NULL until the freeze writes the seed derived from the key
--              (checked against `commitment`), in the transaction that
--              closes entries; published with the draw. Draws created
--              before this migration keep the seed they were created
--              with (and no nonce): they are drawn from it as before.
--
-- draw_entries.drawn_result  the result the draw gave the entry
--              (won, waitlisted, lost) before any roll-down: published, so
--              an auditor recomputes the draw's winners, and sees which
--              winners lapsed (drawn won, now lost) and which waitlisted
--              entries won later. NULL for entries drawn before it.
CREATE TABLE draws_sealed (
    sale_id             TEXT   PRIMARY KEY REFERENCES sales (id),
    entries_open_at_ms  BIGINT NOT NULL,
    entries_close_at_ms BIGINT NOT NULL,
    seed                TEXT,
    nonce               TEXT,
    commitment          TEXT   NOT NULL,
    drawn_at_ms         BIGINT,
    settled_at_ms       BIGINT,
    lease_owner         TEXT,
    lease_until_ms      BIGINT,
    frozen_at_ms        BIGINT,
    entry_digest        TEXT,
    CHECK (seed IS NOT NULL OR nonce IS NOT NULL)
);
INSERT INTO draws_sealed (sale_id, entries_open_at_ms, entries_close_at_ms, seed, nonce,
                          commitment, drawn_at_ms, settled_at_ms, lease_owner,
                          lease_until_ms, frozen_at_ms, entry_digest)
    SELECT sale_id, entries_open_at_ms, entries_close_at_ms, seed, NULL,
           commitment, drawn_at_ms, settled_at_ms, lease_owner,
           lease_until_ms, frozen_at_ms, entry_digest
      FROM draws;
DROP TABLE draws;
ALTER TABLE draws_sealed RENAME TO draws;
ALTER TABLE draw_entries ADD COLUMN drawn_result TEXT;
