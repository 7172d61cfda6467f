-- Joins the queue, or answers the buyer's live ticket.
-- ARGV: now ms, user, fresh ticket, its place (lower is served first)
-- Reply: {ticket, state, value, created (1/0), user} or {'', 'closed', reason, 0}
local now = tonumber(ARGV[1])
local user, fresh = ARGV[2], ARGV[3]
local existing = redis.call('HGET', KEYS[4], user)
if existing then
  local view = ticket_view(existing, now)
  if view and view[1] ~= 'closed' then
    return {existing, view[1], view[2], 0, user}
  end
end
local closed = redis.call('HGET', KEYS[1], 'closed') or ''
if closed ~= '' then return {'', 'closed', closed, 0, user} end
-- The buyer's closed ticket, superseded by the fresh one: pruned, so a room
-- holds one ticket record per buyer at most.
if existing then redis.call('HDEL', KEYS[3], existing) end
redis.call('ZADD', KEYS[2], ARGV[4], fresh)
redis.call('HSET', KEYS[3], fresh, room_gen .. '|w|0|' .. user)
redis.call('HSET', KEYS[4], user, fresh)
return {fresh, 'waiting', redis.call('ZRANK', KEYS[2], fresh) + 1, 1, user}
