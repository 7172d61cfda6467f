-- Decides a batch of purchases of one sale, in order, in ONE transaction:
-- each is exactly a call of engine_purchase (same rules, same codes), so a
-- batch answers as the same purchases one at a time would, and its orders
-- share one commit (one WAL flush) instead of paying one each. Rows come back
-- with their position in the batch (`ordinality` when called WITH ORDINALITY).
CREATE FUNCTION engine_purchase_batch(
    p_sale text, p_epoch bigint, p_now timestamptz,
    p_users text[], p_quantities integer[], p_keys text[], p_orders uuid[]
) RETURNS TABLE (code integer, value bigint, order_id uuid) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. coalesce(array_length(p_users, 1), 0) LOOP
        RETURN QUERY SELECT p.code, p.value, p.order_id
          FROM engine_purchase(p_sale, p_users[i], p_quantities[i], p_keys[i], p_orders[i],
                               p_now, p_epoch) p;
    END LOOP;
END $$;
