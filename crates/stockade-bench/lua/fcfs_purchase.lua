-- The founding article's per-request purchase script, as the `redis-lua`
-- strategy runs it: duplicate check, stock check, decrement, record the
-- buyer, all in one atomic step. (Stockade's own engine script lives in
-- crates/stockade-engine/lua/ and does more: idempotency keys, windows,
-- per-user limits, the outbox.)
-- KEYS[1]  stock counter (string)
-- KEYS[2]  buyers (set of user ids)
-- ARGV[1]  user id
-- Returns  remaining stock after the purchase (>= 0), -1 sold out,
--          -2 already purchased
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  return -2
end
local stock = tonumber(redis.call('GET', KEYS[1]))
if stock == nil or stock <= 0 then
  return -1
end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
return stock - 1
