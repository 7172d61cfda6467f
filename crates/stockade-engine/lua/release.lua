-- Returns an order's items to stock and to its buyer's allowance, once.
-- The order's outbox entry is left alone: an entry carries a whole batch,
-- and the engine's outbox read leaves released orders out (they are never
-- to be committed).
-- KEYS[1]  sale hash, KEYS[2] holdings hash, KEYS[3] orders hash
-- ARGV[1]  order id, ARGV[2] the epoch the release was decided under
-- Returns  {code, quantity, remaining}:
--   1 released, 2 already released, 3 unknown order, 4 unknown sale,
--   5 wrong epoch (remaining = the epoch held, 0 while rebuilding)
local sale = redis.call('HMGET', KEYS[1], 'remaining', 'total', 'epoch')
if not sale[1] then return {4, 0, 0} end
if sale[3] ~= ARGV[2] then return {5, 0, tonumber(sale[3] or '0')} end
local record = redis.call('HGET', KEYS[3], ARGV[1])
if not record then return {3, 0, 0} end
local quantity, state, user = string.match(record, '^(%d+):(%a):(.*)$')
if not quantity then return redis.error_reply('stockade: malformed order record ' .. ARGV[1]) end
if state ~= 'l' then return {2, 0, 0} end
quantity = tonumber(quantity)
if tonumber(sale[1]) + quantity > tonumber(sale[2]) then
  return redis.error_reply('stockade: releasing ' .. ARGV[1] .. ' would exceed the total stock')
end
redis.call('HSET', KEYS[3], ARGV[1], quantity .. ':r:' .. user)
if redis.call('HINCRBY', KEYS[2], user, -quantity) <= 0 then
  redis.call('HDEL', KEYS[2], user)
end
local remaining = redis.call('HINCRBY', KEYS[1], 'remaining', quantity)
return {1, quantity, remaining}
