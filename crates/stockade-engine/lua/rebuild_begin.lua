-- First step of a rebuild under a new epoch: replaces the sale's whole state
-- with the spec and no orders, closed (epoch 0) until rebuild_finish.lua.
-- Fenced: refused if the sale holds, is being built under, or was ever
-- rebuilt under a newer epoch (`newest` survives close.lua).
-- KEYS[1]  sale hash, KEYS[2] holdings, KEYS[3] keys, KEYS[4] orders,
-- KEYS[5]  outbox
-- ARGV     epoch, total, limit, starts, ends, hold, skus, sku_limit, tiers,
--          release_at, shards
-- Returns  {1, 0} begun | {0, newer epoch} superseded
local current = redis.call('HMGET', KEYS[1], 'epoch', 'building', 'newest')
local newest = math.max(tonumber(current[1] or '0'), tonumber(current[2] or '0'),
  tonumber(current[3] or '0'))
local epoch = tonumber(ARGV[1])
if newest > epoch then return {0, newest} end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])
redis.call('HSET', KEYS[1],
  'total', ARGV[2], 'limit', ARGV[3], 'starts', ARGV[4], 'ends', ARGV[5], 'hold', ARGV[6],
  'skus', ARGV[7], 'sku_limit', ARGV[8], 'tiers', ARGV[9], 'release_at', ARGV[10],
  'shards', ARGV[11], 'remaining', '0', 'epoch', '0', 'building', ARGV[1], 'newest', ARGV[1])
return {1, 0}
