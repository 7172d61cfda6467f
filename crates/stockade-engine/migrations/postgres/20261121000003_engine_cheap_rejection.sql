-- Cheap rejection (DESIGN.md invariant 6). The first version of
-- engine_purchase took the sale's row lock before every check, so even a
-- "sold out" answer wrote the lock into the row and waited for a WAL flush
-- at commit. Now the checks run first on an unlocked snapshot: a buyer
-- turned away (unknown sale, replayed key, window, limit, sold out) costs
-- one read-only statement, no transaction id and no WAL. Only when a sale
-- looks possible is the row locked and every check repeated under the lock,
-- which keeps the decision exact.

CREATE OR REPLACE FUNCTION engine_purchase(
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
