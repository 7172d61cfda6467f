-- Closes or reopens the queue as the stock and the window say, then admits
-- as many as the rate credit and the stock allow, from the front.
-- ARGV: now ms, started (1/0), ended (1/0), remaining, admit per second,
--       admission ttl ms, cap (floor(remaining x factor)), burst,
--       admissions used when the stock was read, expired-before ms,
--       sold out (1/0: the store has nothing left; a zero remaining alone,
--       as during a rebuild, admits nobody but keeps the queue)
-- Reply: {closed reason or '', outstanding, waiting, admitted tickets...}
local now = tonumber(ARGV[1])
local started, ended = ARGV[2] == '1', ARGV[3] == '1'
local remaining, rate, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local cap, burst = tonumber(ARGV[7]), tonumber(ARGV[8])
local used_before, expired_before = tonumber(ARGV[9]), tonumber(ARGV[10])
local sold_out = ARGV[11] == '1'
local closed = redis.call('HGET', KEYS[1], 'closed') or ''

local function close(reason)
  redis.call('HSET', KEYS[1], 'closed', reason, 'close:' .. room_gen, reason)
  room_gen = redis.call('HINCRBY', KEYS[1], 'gen', 1)
  redis.call('UNLINK', KEYS[2])
  closed = reason
end

if closed ~= 'ended' then
  if ended then
    close('ended')
  elseif sold_out then
    if closed ~= 'sold_out' then close('sold_out') end
  elseif remaining > 0 and closed == 'sold_out' then
    redis.call('HSET', KEYS[1], 'closed', '')
    closed = ''
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', expired_before)
local outstanding = redis.call('ZCARD', KEYS[5])
-- Used since the stock was read: their items may still be in that figure.
local used_since = math.max(0, tonumber(redis.call('HGET', KEYS[1], 'used') or '0') - used_before)
local waiting = redis.call('ZCARD', KEYS[2])
if closed ~= '' or not started then return {closed, outstanding, waiting} end

local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '-1')
local credit = 1
if last >= 0 then
  credit = tonumber(redis.call('HGET', KEYS[1], 'credit') or '0')
  if now > last then credit = math.min(burst, credit + (now - last) * rate / 1000) end
end
if now > last then redis.call('HSET', KEYS[1], 'last', now) end

local count = math.min(math.floor(credit), cap - outstanding - used_since, waiting)
local reply = {closed, outstanding, waiting}
if count > 0 then
  local until_ms = now + ttl
  local popped = redis.call('ZPOPMIN', KEYS[2], count)
  for i = 1, #popped, 2 do
    local ticket = popped[i]
    local record = redis.call('HGET', KEYS[3], ticket)
    local user = string.match(record, '^%d+|%a|%-?%d+|(.*)$')
    redis.call('HSET', KEYS[3], ticket, room_gen .. '|a|' .. string.format('%d', until_ms) .. '|' .. user)
    redis.call('ZADD', KEYS[5], until_ms, ticket)
    reply[#reply + 1] = ticket
  end
  credit = credit - count
  reply[2] = outstanding + count
  reply[3] = waiting - count
end
redis.call('HSET', KEYS[1], 'credit', tostring(credit))
return reply
