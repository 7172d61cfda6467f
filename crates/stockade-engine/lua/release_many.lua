-- Releases orders of one sale in one atomic step: for each, what releasing
-- it alone would answer, in turn (an order named twice is released once).
-- Each order's items go back to their SKUs' stock, its buyer's
-- allowances and its tier's count. Everything is checked before anything is written, so a
-- malformed record or an overflow writes nothing.
-- The orders' outbox entries are left alone: an entry carries a whole
-- batch, and the engine's outbox read leaves released orders out (they are
-- never to be committed).
-- KEYS[1]  sale hash, KEYS[2] holdings hash, KEYS[3] orders hash (as in
--          purchase.lua)
-- ARGV[1]  n, then n pairs: order id, the epoch its release was decided under
-- Returns  {code, quantity, remaining} per order, flattened: 1 released,
--   2 already released, 3 unknown order, 4 unknown sale, 5 wrong epoch
--   (remaining = the epoch held, 0 while rebuilding); remaining is the
--   sale's stock after that order's release
local n = tonumber(ARGV[1])
local out = {}
local sale = redis.call('HMGET', KEYS[1], 'remaining', 'total', 'epoch', 'skus', 'sku_limit')
if not sale[1] then
  for _ = 1, n do
    out[#out + 1] = 4; out[#out + 1] = 0; out[#out + 1] = 0
  end
  return out
end
local remaining = tonumber(sale[1])
local total = tonumber(sale[2])
local sku_limit = sale[5] and sale[5] ~= ''
-- A sale of several SKUs keeps each one's stock in 'r:' .. id.
local limits, single = {}, true
if sale[4] then
  local count = 0
  for id, stock in string.gmatch(sale[4], '([^,=]+)=(%d+)') do
    limits[id] = tonumber(stock); count = count + 1
  end
  single = count == 1
end
local stock = {}
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
      local quantity, state, user, rest = string.match(record, '^(%d+):(%a):([^\n]*)\n?(.*)$')
      local items, tier = string.match(rest, '^([^\n]*)\n?(.*)$')
      if not quantity then return redis.error_reply('stockade: malformed order record ' .. order) end
      if state ~= 'l' then
        plan[i] = {2, 0, 0}
      else
        quantity = tonumber(quantity)
        if remaining + quantity > total then
          return redis.error_reply('stockade: releasing ' .. order .. ' would exceed the total stock')
        end
        local parsed = {}
        for sku, q in string.gmatch(items, '([^,=]+)=(%d+)') do
          q = tonumber(q)
          parsed[#parsed + 1] = {sku, q}
          if not single then
            local field = 'r:' .. sku
            if stock[field] == nil then stock[field] = tonumber(redis.call('HGET', KEYS[1], field) or '0') end
            if not limits[sku] or stock[field] + q > limits[sku] then
              return redis.error_reply('stockade: releasing ' .. order .. ' would exceed the stock of SKU ' .. sku)
            end
            stock[field] = stock[field] + q
          end
        end
        remaining = remaining + quantity
        seen[order] = true
        plan[i] = {1, quantity, remaining, user, order, record, parsed, tier}
      end
    end
  end
end
local returned = 0
for i = 1, n do
  local p = plan[i]
  if p[1] == 1 then
    redis.call('HSET', KEYS[3], p[5], (string.gsub(p[6], '^(%d+):l:', '%1:r:', 1)))
    if redis.call('HINCRBY', KEYS[2], p[4], -p[2]) <= 0 then
      redis.call('HDEL', KEYS[2], p[4])
    end
    if p[8] ~= '' then
      for _, item in ipairs(p[7]) do
        redis.call('HINCRBY', KEYS[1], 'ts:' .. p[8] .. ':' .. item[1], -item[2])
      end
    end
    if sku_limit then
      for _, item in ipairs(p[7]) do
        local field = p[4] .. '\n' .. item[1]
        if redis.call('HINCRBY', KEYS[2], field, -item[2]) <= 0 then
          redis.call('HDEL', KEYS[2], field)
        end
      end
    end
    returned = returned + p[2]
  end
  out[#out + 1] = p[1]; out[#out + 1] = p[2]; out[#out + 1] = p[3]
end
if returned > 0 then
  local changes = {'remaining', remaining}
  for field, left in pairs(stock) do
    changes[#changes + 1] = field; changes[#changes + 1] = left
  end
  redis.call('HSET', KEYS[1], unpack(changes))
end
return out
