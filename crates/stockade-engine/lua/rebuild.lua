-- Replaces a sale's whole state with one derived from the store, and empties
-- its outbox (whatever was in it and not in the store was never acknowledged).
-- KEYS[1]  sale hash, KEYS[2] holdings, KEYS[3] keys, KEYS[4] orders, KEYS[5] outbox,
-- KEYS[6]  pending
-- ARGV     total, limit, starts, ends, hold, remaining,
--          H (number of holdings), K (number of keys),
--          then H pairs (user id, items), K pairs (key, order id),
--          then pairs (order id, order record) to the end
-- Returns  the remaining stock
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('HSET', KEYS[1],
  'total', ARGV[1], 'limit', ARGV[2], 'starts', ARGV[3], 'ends', ARGV[4], 'hold', ARGV[5],
  'remaining', ARGV[6])
local i = 9
for _ = 1, tonumber(ARGV[7]) do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
for _ = 1, tonumber(ARGV[8]) do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i < #ARGV do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
end
return tonumber(ARGV[6])
