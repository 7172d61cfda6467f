-- Stops a sale from selling until it is rebuilt: its epoch becomes 0, which
-- no purchase carries. The outbox is kept, so whoever rebuilds can commit
-- what it holds first.
-- KEYS[1]  sale hash
-- Returns  the epoch the sale held, or -1 for an unknown sale
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not redis.call('HGET', KEYS[1], 'total') then return -1 end
redis.call('HSET', KEYS[1], 'epoch', '0')
return tonumber(epoch or '0')
