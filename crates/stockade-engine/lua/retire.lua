-- Lets an ended sale's keys go: each key that exists expires in ARGV[1] ms
-- (0: unlinked at once). The store keeps the orders; nothing is sold
-- outside the sale's window, so the keys only cost memory.
-- KEYS[1..5]  sale hash, holdings, keys, orders, outbox
-- ARGV[1]     time to live, ms
-- Returns     how many keys there were
local ttl = tonumber(ARGV[1])
local found = 0
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    found = found + 1
    if ttl <= 0 then
      redis.call('UNLINK', KEYS[i])
    else
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
  end
end
return found
