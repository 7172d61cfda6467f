-- The waiting room of a sale (issue 11), recorded in the transaction that
-- creates the sale and never changed afterwards, so every instance may
-- cache it. A sale without a row has no waiting room.
--
-- admission_factor_milli  outstanding admissions may reach remaining stock
--                         times this / 1000 (1500: the default factor 1.5).
CREATE TABLE waiting_rooms (
    sale_id                TEXT   PRIMARY KEY REFERENCES sales (id),
    admit_per_second       BIGINT NOT NULL,
    admission_ttl_ms       BIGINT NOT NULL,
    admission_factor_milli BIGINT NOT NULL
);
