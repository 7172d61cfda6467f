-- Removes orders committed to the store from the outbox.
-- KEYS[1]  outbox stream, KEYS[2] pending hash
-- ARGV     order ids (unknown or already acknowledged ones are ignored)
-- Returns  how many entries were removed
local removed = 0
for i = 1, #ARGV do
  local entry = redis.call('HGET', KEYS[2], ARGV[i])
  if entry then
    removed = removed + redis.call('XDEL', KEYS[1], entry)
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return removed
