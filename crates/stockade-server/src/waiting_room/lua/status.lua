-- A ticket. ARGV: ticket, now ms, restore (1/0), its buyer, its place.
-- Reply: {state, value, user} or {}.
-- With restore (the service checked the ticket's mac), a ticket the room
-- does not know, whose buyer holds no ticket here either, was lost with the
-- room's keys (Redis restarted empty, or failed over to a replica that had
-- not caught up): it is put back at its own place. A ticket superseded by a
-- later join of its buyer stays unknown.
local ticket, now = ARGV[1], tonumber(ARGV[2])
local view = ticket_view(ticket, now)
if view then return view end
if ARGV[3] ~= '1' then return {} end
local user = ARGV[4]
if redis.call('HEXISTS', KEYS[4], user) == 1 then return {} end
local closed = redis.call('HGET', KEYS[1], 'closed') or ''
if closed ~= '' then return {'closed', closed, user} end
redis.call('ZADD', KEYS[2], ARGV[5], ticket)
redis.call('HSET', KEYS[3], ticket, room_gen .. '|w|0|' .. user)
redis.call('HSET', KEYS[4], user, ticket)
return ticket_view(ticket, now)
