-- Releases many orders of one sale in one atomic step: for each, exactly
-- what release.lua answers when called for each in turn (an order named
-- twice is released once). Everything is checked before anything is
-- written, so a malformed record or an overflow writes nothing.
-- KEYS[1]  sale hash, KEYS[2] holdings hash, KEYS[3] orders hash
-- ARGV[1]  n, then n pairs: order id, the epoch its release was decided under
-- Returns  {code, quantity, remaining} per order, flattened (codes as in
--   release.lua; remaining is the stock after that order's release)
local n = tonumber(ARGV[1])
local out = {}
local sale = redis.call('HMGET', KEYS[1], 'remaining', 'total', 'epoch')
if not sale[1] then
  for _ = 1, n do
    out[#out + 1] = 4; out[#out + 1] = 0; out[#out + 1] = 0
  end
  return out
end
local remaining = tonumber(sale[1])
local total = tonumber(sale[2])
local plan = {}
local seen = {}
for i = 1, n do
  local order = ARGV[2 * i]
  if sale[3] ~= ARGV[2 * i + 1] then
    plan[i] = {5, 0, tonumber(sale[3] or '0')}
  elseif seen[order] then
    plan[i] = {2, 0, 0}
  else
    local record = redis.call('HGET', KEYS[3], order)
    if not record then
      plan[i] = {3, 0, 0}
    else
      local quantity, state, user = string.match(record, '^(%d+):(%a):(.*)$')
      if not quantity then return redis.error_reply('stockade: malformed order record ' .. order) end
      if state ~= 'l' then
        plan[i] = {2, 0, 0}
      else
        quantity = tonumber(quantity)
        if remaining + quantity > total then
          return redis.error_reply('stockade: releasing ' .. order .. ' would exceed the total stock')
        end
        remaining = remaining + quantity
        seen[order] = true
        plan[i] = {1, quantity, remaining, user, order}
      end
    end
  end
end
local returned = 0
for i = 1, n do
  local p = plan[i]
  if p[1] == 1 then
    redis.call('HSET', KEYS[3], p[5], p[2] .. ':r:' .. p[4])
    if redis.call('HINCRBY', KEYS[2], p[4], -p[2]) <= 0 then
      redis.call('HDEL', KEYS[2], p[4])
    end
    returned = returned + p[2]
  end
  out[#out + 1] = p[1]; out[#out + 1] = p[2]; out[#out + 1] = p[3]
end
if returned > 0 then
  redis.call('HINCRBY', KEYS[1], 'remaining', returned)
end
return out
