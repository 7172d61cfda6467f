-- Epochs (docs/consistency.md) and idempotency keys scoped to their buyer.
--
-- Every sale is held under an epoch: purchases and releases carry the epoch
-- their caller believes in and are refused (code 9 / 5) under another one.
-- 0 means closed: a rebuild is under way. `newest` is the newest epoch a
-- rebuild ever ran under; an older rebuild is refused.
ALTER TABLE engine_sales ADD COLUMN epoch bigint NOT NULL DEFAULT 1;
ALTER TABLE engine_sales ADD COLUMN newest bigint NOT NULL DEFAULT 1;

ALTER TABLE engine_orders DROP CONSTRAINT engine_orders_sale_id_idempotency_key_key;
ALTER TABLE engine_orders ADD CONSTRAINT engine_orders_buyer_key UNIQUE (sale_id, user_id, idempotency_key);
ALTER TABLE engine_orders ADD COLUMN epoch bigint NOT NULL DEFAULT 1;

DROP FUNCTION engine_purchase(text, text, integer, text, uuid, timestamptz);
DROP FUNCTION engine_release(text, uuid);

-- Codes: 1 purchased (value = remaining), 2 sold out, 3 insufficient stock
-- (value = remaining), 4 limit exceeded (value = already held), 5 duplicate
-- (order_id = original), 6 not started, 7 ended, 8 unknown sale, 9 wrong
-- epoch (value = the epoch held). Rejections are answered from an unlocked
-- snapshot; the row is locked, and every check repeated, only when a sale
-- looks possible.
CREATE FUNCTION engine_purchase(
    p_sale text, p_user text, p_quantity integer, p_key text, p_order uuid, p_now timestamptz,
    p_epoch bigint,
    OUT code integer, OUT value bigint, OUT order_id uuid
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
        IF sale.epoch <> p_epoch THEN code := 9; value := sale.epoch; RETURN; END IF;

        IF p_key IS NOT NULL THEN
            SELECT o.id INTO order_id FROM engine_orders o
             WHERE o.sale_id = p_sale AND o.user_id = p_user AND o.idempotency_key = p_key;
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
    INSERT INTO engine_orders (id, sale_id, user_id, quantity, idempotency_key, created_at, epoch)
    VALUES (p_order, p_sale, p_user, p_quantity, p_key, p_now, p_epoch);
    code := 1; value := sale.remaining - p_quantity; order_id := p_order;
END $$;

-- Codes: 1 released (quantity, remaining), 2 already released, 3 unknown
-- order, 4 unknown sale, 5 wrong epoch (remaining = the epoch held).
CREATE FUNCTION engine_release(
    p_sale text, p_order uuid, p_epoch bigint,
    OUT code integer, OUT quantity integer, OUT remaining bigint
) LANGUAGE plpgsql AS $$
DECLARE
    was_live boolean;
    held bigint;
BEGIN
    quantity := 0;
    SELECT s.remaining, s.epoch INTO remaining, held FROM engine_sales s WHERE s.id = p_sale FOR UPDATE;
    IF NOT FOUND THEN code := 4; remaining := 0; RETURN; END IF;
    IF held <> p_epoch THEN code := 5; remaining := held; RETURN; END IF;
    SELECT o.quantity, o.live INTO quantity, was_live FROM engine_orders o
     WHERE o.id = p_order AND o.sale_id = p_sale;
    IF NOT FOUND THEN code := 3; quantity := 0; RETURN; END IF;
    IF NOT was_live THEN code := 2; quantity := 0; RETURN; END IF;
    UPDATE engine_orders SET live = false WHERE id = p_order;
    UPDATE engine_sales s SET remaining = s.remaining + quantity
     WHERE s.id = p_sale RETURNING s.remaining INTO remaining;
    code := 1;
END $$;
