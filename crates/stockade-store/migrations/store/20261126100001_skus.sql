-- SKUs and bundles (issue 20). One schema for PostgreSQL and SQLite.
--
-- sales.skus              the SKUs and their stock, 'id=stock,...' in the
--                         order given at creation; NULL for a sale created
--                         before SKUs: one SKU named 'default' holding
--                         total_stock.
-- sales.per_sku_limit     what one buyer may hold of each SKU (NULL: none).
-- sales.sku_sold          for a sale of several SKUs, the items of each SKU
--                         held by live orders, 'n,n,...' in the SKUs' order
--                         (`sold` stays their sum); NULL for one SKU, whose
--                         sold count is `sold`.
-- orders.items            what the order holds, 'sku=quantity,...'; NULL for
--                         an order from before SKUs: its whole quantity of
--                         'default'.
-- holdings.sku_quantities for a sale with a per-SKU limit, what the buyer
--                         holds of each SKU, 'sku=quantity,...' (SKUs held
--                         only); NULL otherwise.
ALTER TABLE sales ADD COLUMN skus TEXT;
ALTER TABLE sales ADD COLUMN per_sku_limit BIGINT;
ALTER TABLE sales ADD COLUMN sku_sold TEXT;
ALTER TABLE orders ADD COLUMN items TEXT;
ALTER TABLE holdings ADD COLUMN sku_quantities TEXT;
