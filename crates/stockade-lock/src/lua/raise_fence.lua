-- Raise a node's fencing counter to at least a given value (Redlock only).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fencing counter
-- ARGV[1]  the owner token
-- ARGV[2]  the fencing token chosen for this acquisition (the largest counter
--          among the nodes that granted the lock)
--
-- Returns 1 when the caller still owns the lock on this node (the counter is
-- now at least ARGV[2]), 0 otherwise. Raising the counters on a quorum before
-- the token is used makes the next quorum, which overlaps this one in at least
-- one node, draw a strictly larger token.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
