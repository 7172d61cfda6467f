-- The PostgreSQL stock engine: the "database lock" strategy. Every purchase
-- is one transaction that locks its sale row (SELECT ... FOR UPDATE), checks
-- the idempotency key, the window, the buyer's limit and the stock, then
-- decrements the stock and inserts the order. Purchases of one sale are
-- serialised by the row lock; purchases of different sales do not contend.
--
-- Cheap rejection (DESIGN.md invariant 6): engine_purchase runs its checks
-- on an unlocked snapshot first, so a buyer turned away (unknown sale,
-- replayed key, window, limit, sold out) costs one read-only statement, no
-- transaction id and no WAL flush. Only when a sale looks possible is the
-- row locked and every check repeated under the lock.

CREATE TABLE engine_sales (
    id             text        PRIMARY KEY,
    total_stock    integer     NOT NULL CHECK (total_stock BETWEEN 1 AND 1000000000),
    remaining      integer     NOT NULL CHECK (remaining >= 0 AND remaining <= total_stock),
    per_user_limit integer     NOT NULL CHECK (per_user_limit >= 1),
    starts_at      timestamptz,
    ends_at        timestamptz,
    hold_ms        bigint      CHECK (hold_ms >= 1000),
    CHECK (ends_at IS NULL OR starts_at IS NULL OR ends_at > starts_at)
);

CREATE TABLE engine_orders (
    id              uuid        PRIMARY KEY,
    sale_id         text        NOT NULL REFERENCES engine_sales (id) ON DELETE CASCADE,
    user_id         text        NOT NULL,
    quantity        integer     NOT NULL CHECK (quantity >= 1),
    idempotency_key text,
    live            boolean     NOT NULL DEFAULT true,
    created_at      timestamptz NOT NULL,
    UNIQUE (sale_id, idempotency_key)
);

-- The per-buyer limit check sums a buyer's live orders in one sale.
CREATE INDEX engine_orders_buyer ON engine_orders (sale_id, user_id) WHERE live;

-- Codes: 1 purchased (value = remaining), 2 sold out, 3 insufficient stock
-- (value = remaining), 4 limit exceeded (value = already held), 5 duplicate
-- (order_id = original), 6 not started, 7 ended, 8 unknown sale.
CREATE FUNCTION engine_purchase(
    p_sale text, p_user text, p_quantity integer, p_key text, p_order uuid, p_now timestamptz,
    OUT code integer, OUT value integer, OUT order_id uuid
) LANGUAGE plpgsql AS $$
DECLARE
    sale engine_sales%ROWTYPE;
    already integer;
    locked boolean := false;
BEGIN
    value := 0;
    LOOP
        IF locked THEN
            SELECT * INTO sale FROM engine_sales WHERE id = p_sale FOR UPDATE;
        ELSE
            SELECT * INTO sale FROM engine_sales WHERE id = p_sale;
        END IF;
        IF NOT FOUND THEN code := 8; RETURN; END IF;

        IF p_key IS NOT NULL THEN
            SELECT o.id INTO order_id FROM engine_orders o
             WHERE o.sale_id = p_sale AND o.idempotency_key = p_key;
            IF FOUND THEN code := 5; RETURN; END IF;
        END IF;

        IF sale.starts_at IS NOT NULL AND p_now < sale.starts_at THEN code := 6; RETURN; END IF;
        IF sale.ends_at IS NOT NULL AND p_now >= sale.ends_at THEN code := 7; RETURN; END IF;

        SELECT coalesce(sum(o.quantity), 0) INTO already FROM engine_orders o
         WHERE o.sale_id = p_sale AND o.user_id = p_user AND o.live;
        IF already::bigint + p_quantity > sale.per_user_limit THEN
            code := 4; value := already; RETURN;
        END IF;

        IF sale.remaining = 0 THEN code := 2; RETURN; END IF;
        IF sale.remaining < p_quantity THEN code := 3; value := sale.remaining; RETURN; END IF;

        EXIT WHEN locked;
        -- A sale looks possible: lock the row and check again.
        locked := true;
    END LOOP;

    UPDATE engine_sales SET remaining = remaining - p_quantity WHERE id = p_sale;
    INSERT INTO engine_orders (id, sale_id, user_id, quantity, idempotency_key, created_at)
    VALUES (p_order, p_sale, p_user, p_quantity, p_key, p_now);
    code := 1; value := sale.remaining - p_quantity; order_id := p_order;
END $$;

-- Codes: 1 released (quantity, remaining), 2 already released, 3 unknown
-- order, 4 unknown sale.
CREATE FUNCTION engine_release(
    p_sale text, p_order uuid,
    OUT code integer, OUT quantity integer, OUT remaining integer
) LANGUAGE plpgsql AS $$
DECLARE
    was_live boolean;
BEGIN
    quantity := 0;
    SELECT s.remaining INTO remaining FROM engine_sales s WHERE s.id = p_sale FOR UPDATE;
    IF NOT FOUND THEN code := 4; remaining := 0; RETURN; END IF;
    SELECT o.quantity, o.live INTO quantity, was_live FROM engine_orders o
     WHERE o.id = p_order AND o.sale_id = p_sale;
    IF NOT FOUND THEN code := 3; quantity := 0; RETURN; END IF;
    IF NOT was_live THEN code := 2; quantity := 0; RETURN; END IF;
    UPDATE engine_orders SET live = false WHERE id = p_order;
    UPDATE engine_sales s SET remaining = s.remaining + quantity
     WHERE s.id = p_sale RETURNING s.remaining INTO remaining;
    code := 1;
END $$;
