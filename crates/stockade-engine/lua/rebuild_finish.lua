-- Last step of a rebuild: sets the stock and opens the sale under its new
-- epoch.
-- KEYS[1]  sale hash
-- ARGV     epoch, remaining, then pairs: for a sale of several SKUs
--          'r:' .. id and its stock left, for a sale with tiers
--          'ts:' .. tier position .. ':' .. id and what its buyers hold
-- Returns  {1, remaining} open | {0, newer epoch} superseded
local building = tonumber(redis.call('HGET', KEYS[1], 'building') or '0')
if building ~= tonumber(ARGV[1]) then
  local newest = tonumber(redis.call('HGET', KEYS[1], 'newest') or '0')
  return {0, math.max(building, newest)}
end
redis.call('HSET', KEYS[1], 'remaining', ARGV[2], 'epoch', ARGV[1], unpack(ARGV, 3))
redis.call('HDEL', KEYS[1], 'building')
return {1, tonumber(ARGV[2])}
