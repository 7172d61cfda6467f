-- One bounded chunk of a rebuild: buyers' holdings, idempotency keys and
-- order records, added while the sale is closed.
-- KEYS[1]  sale hash, KEYS[2] holdings, KEYS[3] keys, KEYS[4] orders
-- ARGV     epoch, H (number of holdings: per buyer, and per buyer and SKU
--          as "user id\nsku" for a sale with a per-SKU limit), K (number of keys),
--          then H pairs (user id, items), K pairs (user id .. "\n" .. key, order id),
--          then pairs (order id, order record) to the end
-- Returns  {1, 0} added | {0, newer epoch} superseded (nothing added)
local building = tonumber(redis.call('HGET', KEYS[1], 'building') or '0')
if building ~= tonumber(ARGV[1]) then
  local newest = tonumber(redis.call('HGET', KEYS[1], 'newest') or '0')
  return {0, math.max(building, newest)}
end
local i = 4
for _ = 1, tonumber(ARGV[2]) do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
for _ = 1, tonumber(ARGV[3]) do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i < #ARGV do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
end
return {1, 0}
