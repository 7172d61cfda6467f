-- Payment holds (docs/consistency.md, "Holds"). An order of a sale with a
-- hold is committed as 'held' with the instant its hold runs out; it is
-- confirmed by the payment, or expired by the sweeper once that instant has
-- passed, each decided under the sale's row lock, so exactly once.
ALTER TABLE orders ADD COLUMN expires_at_ms BIGINT;

-- The clock-ordered index the expiry sweeper reads: only live holds, by
-- deadline, so finding what is due costs one index range scan however many
-- orders the store keeps.
CREATE INDEX orders_holds_by_deadline ON orders (expires_at_ms) WHERE status = 'held';
