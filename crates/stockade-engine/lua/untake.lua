-- Puts a transfer's stock back into the shard it was taken from, once
-- give.lua refuses it as too old (so it was never given, and never will
-- be). A record already gone (finished, or put back) changes nothing.
-- KEYS[1]  the giving shard's sale hash
-- ARGV     transfer id
-- Returns  the items put back
local record = redis.call('HGET', KEYS[1], 'xout:' .. ARGV[1])
if not record then return 0 end
local taken = tonumber(string.match(record, '^%d+:(%d+):'))
redis.call('HINCRBY', KEYS[1], 'remaining', taken)
redis.call('HDEL', KEYS[1], 'xout:' .. ARGV[1])
return taken
