-- Gives a transfer's stock to the receiving shard (take.lua took it), at
-- most once per transfer: 'xin:' .. transfer id marks it given. A transfer
-- taken more than ARGV[5] ms ago (by Redis's clock) is refused: past that,
-- the stock may be put back where it came from (untake.lua), so a giver
-- that stalled longer can never give it a second time.
-- KEYS[1]  the receiving shard's sale hash
-- ARGV     epoch, transfer id, items, take time ms, horizon ms
-- Returns  {1, remaining after} given (or given before) | {0, epoch held
--          (-1: no sale)} | {2, 0} too old
local sale = redis.call('HMGET', KEYS[1], 'remaining', 'epoch', 'total')
if not sale[1] then return {0, -1} end
if sale[2] ~= ARGV[1] then return {0, tonumber(sale[2] or '0')} end
if redis.call('HEXISTS', KEYS[1], 'xin:' .. ARGV[2]) == 1 then return {1, tonumber(sale[1])} end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if now - tonumber(ARGV[4]) > tonumber(ARGV[5]) then return {2, 0} end
local after = tonumber(sale[1]) + tonumber(ARGV[3])
if after > tonumber(sale[3]) then
  return redis.error_reply('stockade: a transfer would give shard ' .. KEYS[1] .. ' more than the sale holds')
end
redis.call('HSET', KEYS[1], 'remaining', after, 'xin:' .. ARGV[2], ARGV[4])
return {1, after}
