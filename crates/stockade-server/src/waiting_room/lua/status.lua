-- Tickets of one sale, in order, each as if alone. Concurrent polls of a
-- sale share one call (see `Batcher`).
-- ARGV: per ticket, five: ticket, now ms, restore (1/0), its buyer, its
-- place.
-- Reply: per ticket {state, value, user}, or {} for an unknown ticket.
-- With restore (the service checked the ticket's mac), a ticket the room
-- does not know was lost with the room's keys (Redis restarted empty, or
-- failed over to a replica that had not caught up): it is put back at its
-- own place. Its buyer may hold another ticket here:
-- - an earlier one (a lower place): the lost ticket came from a later join
--   that only the lost writes saw; it supersedes the held one, as that join
--   did (unless the held one is a live admission: the buyer's next join is
--   answered with it);
-- - a later one: the polled ticket is the one a later join superseded, and
--   stays unknown.
local function status(ticket, now, restore, user, place)
  local view = ticket_view(ticket, now)
  if view then return view end
  if restore ~= '1' then return {} end
  local held = redis.call('HGET', KEYS[4], user)
  if held then
    local held_place = tonumber(string.match(held, '^[^.]*%.(%x+)%.'), 16)
    if not held_place or held_place >= tonumber(place) then return {} end
    local held_view = ticket_view(held, now)
    if held_view and held_view[1] == 'admitted' then return {} end
  end
  local closed = redis.call('HGET', KEYS[1], 'closed') or ''
  if closed ~= '' then return {'closed', closed, user} end
  if held then
    redis.call('ZREM', KEYS[2], held)
    redis.call('HDEL', KEYS[3], held)
  end
  redis.call('ZADD', KEYS[2], place, ticket)
  redis.call('HSET', KEYS[3], ticket, room_gen .. '|w|0|' .. user)
  redis.call('HSET', KEYS[4], user, ticket)
  return ticket_view(ticket, now)
end

local replies = {}
for i = 1, #ARGV, 5 do
  replies[#replies + 1] =
    status(ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2], ARGV[i + 3], ARGV[i + 4])
end
return replies
