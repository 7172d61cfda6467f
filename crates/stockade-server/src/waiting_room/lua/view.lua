-- Shared by the waiting-room scripts (prepended to each). Keys of one sale:
-- KEYS[1] room     hash: gen, seq, closed, close:<gen>, credit, last, used
-- KEYS[2] waiting  zset: ticket -> place (pre-queue: random in [0, 1);
--                  later joins: 1 + seq, so they queue behind)
-- KEYS[3] tickets  hash: ticket -> "<gen>|<w or a>|<admitted until ms>|<user>"
-- KEYS[4] users    hash: user -> ticket
-- KEYS[5] admitted zset: ticket -> admitted until ms (outstanding only)
local room_gen = tonumber(redis.call('HGET', KEYS[1], 'gen') or '0')

-- {state, position | until_ms | reason, user} or nil.
local function ticket_view(ticket, now)
  local record = redis.call('HGET', KEYS[3], ticket)
  if not record then return nil end
  local gen, state, until_ms, user = string.match(record, '^(%d+)|(%a)|(%-?%d+)|(.*)$')
  until_ms = tonumber(until_ms)
  if state == 'a' then
    if until_ms > now then return {'admitted', until_ms, user} end
    return {'closed', 'admission_expired', user}
  end
  if tonumber(gen) ~= room_gen then
    return {'closed', redis.call('HGET', KEYS[1], 'close:' .. gen) or 'sold_out', user}
  end
  local rank = redis.call('ZRANK', KEYS[2], ticket)
  if not rank then return {'closed', 'sold_out', user} end
  return {'waiting', rank + 1, user}
end
