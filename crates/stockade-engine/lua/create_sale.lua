-- Creates a sale under the first epoch (1), or reports that it exists
-- (identical) or conflicts.
-- KEYS[1]  the sale hash
-- ARGV     total, per-user limit, starts (ms or ''), ends (ms or ''), hold
--          (ms or ''), skus ('id=stock,...'), per-SKU limit (or ''), tiers (as
--          purchase.lua reads them, or ''), release_at (ms or ''), shards,
--          then pairs of fields set beside them: for a sale of several SKUs
--          'r:' .. id and its stock; for a shard of a sharded sale
--          'remaining' and the shard's part of the stock
-- Returns  {'created'} | {'exists'} | {'conflict', the ten stored fields}
local fields = {'total', 'limit', 'starts', 'ends', 'hold', 'skus', 'sku_limit', 'tiers', 'release_at',
  'shards'}
local existing = redis.call('HMGET', KEYS[1], unpack(fields))
if existing[1] then
  -- A sale created before SKUs has one SKU named 'default' and no per-SKU limit.
  existing[6] = existing[6] or ('default=' .. existing[1])
  existing[7] = existing[7] or ''
  existing[8] = existing[8] or ''
  existing[9] = existing[9] or ''
  existing[10] = existing[10] or '1'
  for i = 1, #fields do
    if existing[i] ~= ARGV[i] then
      return {'conflict', unpack(existing)}
    end
  end
  return {'exists'}
end
redis.call('HSET', KEYS[1],
  'total', ARGV[1], 'limit', ARGV[2], 'starts', ARGV[3], 'ends', ARGV[4], 'hold', ARGV[5],
  'skus', ARGV[6], 'sku_limit', ARGV[7], 'tiers', ARGV[8], 'release_at', ARGV[9],
  'shards', ARGV[10], 'remaining', ARGV[1], 'epoch', '1', 'newest', '1')
if #ARGV > 10 then redis.call('HSET', KEYS[1], unpack(ARGV, 11)) end
return {'created'}
