-- Joins of one sale's queue, in order, each as if alone: a buyer joins, or
-- gets their live ticket back. Concurrent joins of a sale share one call
-- (see `Batcher`), so a crowd costs Redis one call per batch.
-- ARGV: per join, four: now ms, user, fresh ticket, its place (lower is
-- served first).
-- Reply: per join {ticket, state, value, created (1/0), user}, or
-- {'', 'closed', reason, 0, user}.
-- Read once per call: no join closes the room, so it holds for the batch.
local closed = redis.call('HGET', KEYS[1], 'closed') or ''

local function join(now, user, fresh, place)
  local existing = redis.call('HGET', KEYS[4], user)
  if existing then
    local view = ticket_view(existing, now)
    if view and view[1] ~= 'closed' then
      return {existing, view[1], view[2], 0, user}
    end
  end
  if closed ~= '' then return {'', 'closed', closed, 0, user} end
  -- The buyer's closed ticket, superseded by the fresh one: pruned, so a
  -- room holds one ticket record per buyer at most.
  if existing then redis.call('HDEL', KEYS[3], existing) end
  redis.call('ZADD', KEYS[2], place, fresh)
  redis.call('HSET', KEYS[3], fresh, room_gen .. '|w|0|' .. user)
  redis.call('HSET', KEYS[4], user, fresh)
  return {fresh, 'waiting', redis.call('ZRANK', KEYS[2], fresh) + 1, 1, user}
end

local replies = {}
for i = 1, #ARGV, 4 do
  replies[#replies + 1] = join(tonumber(ARGV[i]), ARGV[i + 1], ARGV[i + 2], ARGV[i + 3])
end
return replies
