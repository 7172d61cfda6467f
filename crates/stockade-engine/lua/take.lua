-- Takes stock from one shard of a sharded sale for a sibling shard (a
-- transfer's first step; give.lua is the second). What is taken is
-- recorded in the shard's hash as 'xout:' .. transfer id until the
-- sibling has it, so stock in flight is never lost: whoever finds a
-- record older than a few seconds finishes the transfer (see
-- stockade_engine's shards::transfer). A sharded sale has one SKU and no
-- tiers, so its stock is 'remaining' alone.
-- KEYS[1]  the shard's sale hash
-- ARGV     epoch, transfer id, the receiving shard, at least (items), a
--          divisor d (0 for none): takes max(at least, remaining / d), no
--          more than the shard has
-- Returns  {1, taken, take time ms} | {0, the epoch held (-1: no sale)}
local sale = redis.call('HMGET', KEYS[1], 'remaining', 'epoch')
if not sale[1] then return {0, -1, 0} end
if sale[2] ~= ARGV[1] then return {0, tonumber(sale[2] or '0'), 0} end
local remaining = tonumber(sale[1])
local divisor = tonumber(ARGV[5])
local wanted = tonumber(ARGV[4])
if divisor > 0 then wanted = math.max(wanted, math.floor(remaining / divisor)) end
local taken = math.min(remaining, wanted)
if taken <= 0 then return {1, 0, 0} end
local time = redis.call('TIME')
local at = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
redis.call('HSET', KEYS[1], 'remaining', remaining - taken,
  'xout:' .. ARGV[2], ARGV[3] .. ':' .. taken .. ':' .. at)
return {1, taken, at}
