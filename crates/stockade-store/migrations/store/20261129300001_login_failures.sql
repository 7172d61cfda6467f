-- Failed dashboard logins (issue 36, item 3): one row per failure, by
-- client address as the rate limiter names it, so the throttle (five a
-- minute) counts the failures made on every instance behind a load
-- balancer. Rows older than the window are deleted as new ones come in.
CREATE TABLE login_failures (
    client TEXT   NOT NULL,
    at_ms  BIGINT NOT NULL
);
CREATE INDEX login_failures_by_client ON login_failures (client, at_ms);
CREATE INDEX login_failures_by_time ON login_failures (at_ms);
