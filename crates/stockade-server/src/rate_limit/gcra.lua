-- One GCRA (generic cell rate algorithm) step for one key, shared by every
-- instance: the key holds the theoretical arrival time (TAT) in
-- microseconds and expires once the whole burst is available again.
--
-- KEYS[1]  the limit's key
-- ARGV[1]  now, in microseconds (the instance's clock)
-- ARGV[2]  emission interval T, in microseconds (one request's share)
-- ARGV[3]  burst: how many requests may arrive at once
--
-- Returns {1, 0} when the request conforms (the TAT moves on by T), or
-- {0, wait} with the microseconds until it would, changing nothing.
local now = tonumber(ARGV[1])
local interval = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local tolerance = interval * (burst - 1)

local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then
  tat = now
end
local allowed_at = tat - tolerance
if now < allowed_at then
  return {0, allowed_at - now}
end
local new_tat = tat + interval
local ttl_ms = math.ceil((new_tat - now) / 1000)
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', ttl_ms)
return {1, 0}
