-- Decides a batch of purchases of one sale in one atomic step, each in
-- arrival order with the rules of a single purchase (stockade_core::rule):
-- sale exists, epoch, idempotency key, the items' SKUs, window (a tier's
-- may open earlier), per-user limit (a tier's own), per-SKU limit, stock of
-- every item (a tier's reserve first, see stockade_core::rule::available).
-- A purchase's items are all or nothing: stock is checked before it is
-- changed, so it is never decremented and restored, and never negative.
--
-- The work is per batch, not per purchase: one read of the sale, one read of
-- the buyers' holdings and of the keys, one write of each, and ONE outbox
-- entry carrying every accepted order of the batch. Per purchase there is
-- only Lua arithmetic and a field in each write.
--
-- KEYS[1]  sale hash       (total, limit, starts, ends, hold, remaining, epoch,
--                           skus 'id=stock,...', sku_limit, tiers (per tier
--                           'name;limit;starts ms;sku=reserved,...', joined by
--                           '|'), release_at (ms or ''), for a sale of several
--                           SKUs 'r:' .. sku -> that SKU's stock left (a one-SKU
--                           sale keeps its stock in 'remaining' alone), and for
--                           a sale with tiers 'ts:' .. tier position .. ':' ..
--                           sku -> items of the SKU its buyers hold)
-- KEYS[2]  holdings hash   (user id -> items held; with a per-SKU limit also
--                           user id .. "\n" .. sku -> items of that SKU held)
-- KEYS[3]  keys hash       (user id .. "\n" .. idempotency key -> order id;
--                           keys are scoped to their buyer)
-- KEYS[4]  orders hash     (order id -> "quantity:state:user id\nitems\ntier",
--                           state l=live r=released, items 'sku=quantity,...',
--                           tier the buyer's tier position or '')
-- KEYS[5]  outbox stream   (one entry per batch that accepted an order, until
--                           acknowledged as committed to the store)
-- ARGV[1]  now (ms), ARGV[2] the number of purchases n, ARGV[3] the epoch the
--          callers believe the sale is under, then six per purchase: user
--          id, quantity, idempotency key ('' for none), new order id, items
--          ('sku=quantity,...', or '' for the sale's only SKU), tier ('' for
--          none; a tier the sale does not name counts as none); or four per
--          purchase (the first four) when no purchase of the batch names
--          items or a tier, as most batches
-- Returns  {entry id or '', code1, value1, code2, value2, ...}, per purchase:
--   1 purchased (remaining), 2 sold out (0), 3 insufficient stock
--   ('sku=remaining'), 4 limit exceeded (already held), 5 duplicate (the
--   original order id), 6 not started, 7 ended, 8 unknown sale, 9 wrong
--   epoch (the epoch held; 0 while a rebuild is under way), 10 unknown SKU
--   (the SKU), 11 SKU required (0), 12 per-SKU limit exceeded
--   ('sku=already held')
--   Refused whole (an error, nothing written) beyond 2000 purchases.
-- Outbox entry fields: 'epoch', 'at' (ms), then per accepted order:
--   order id -> user id .. "\n" .. quantity .. "\n" .. idempotency key
--   .. "\n" .. items .. "\n" .. tier name ('' for none); for a sale of one
--   SKU named 'default' and no tiers (a sale created with `stock` alone)
--   items and tier are left out, as in entries written before SKUs, and
--   the order record is "quantity:state:user id" alone
local n = tonumber(ARGV[2])
local reply = {''}
local stride = n > 0 and (#ARGV - 3) / n or 4
if stride ~= 4 and stride ~= 6 then
  return redis.error_reply('stockade: ' .. (#ARGV - 3) .. ' arguments for ' .. n .. ' purchases')
end
-- Lua 5.1 unpacks at most about 8,000 values into one call, and a call
-- that fails after the first write leaves half a batch written. So every
-- list is unpacked at most CHUNK values at a time, and a batch is at most
-- 2000 purchases: its outbox entry (two values per order) is one XADD.
local CHUNK = 4000
if n > 2000 then
  return redis.error_reply('stockade: ' .. n .. ' purchases in one call; at most 2000')
end
-- HMGET key ...fields, CHUNK fields at a time, the replies joined in order.
local function hmget(key, list)
  if #list <= CHUNK then return redis.call('HMGET', key, unpack(list)) end
  local replies = {}
  for first = 1, #list, CHUNK do
    local part = redis.call('HMGET', key, unpack(list, first, math.min(first + CHUNK - 1, #list)))
    for i = 1, #part do replies[#replies + 1] = part[i] end
  end
  return replies
end
-- HSET key ...pairs, CHUNK values (whole field-value pairs) at a time.
local function hset(key, list)
  for first = 1, #list, CHUNK do
    redis.call('HSET', key, unpack(list, first, math.min(first + CHUNK - 1, #list)))
  end
end
local function items_of(base) return stride == 6 and ARGV[base + 4] or '' end
local function tier_of_purchase(base) return stride == 6 and ARGV[base + 5] or '' end
local sale = redis.call('HMGET', KEYS[1], 'remaining', 'limit', 'starts', 'ends', 'epoch',
  'skus', 'sku_limit', 'tiers', 'release_at')
if not sale[1] then
  for i = 1, n do reply[2 * i] = 8; reply[2 * i + 1] = 0 end
  return reply
end
local epoch = sale[5]
if epoch ~= ARGV[3] then
  local held = tonumber(epoch or '0')
  for i = 1, n do reply[2 * i] = 9; reply[2 * i + 1] = held end
  return reply
end
local now = tonumber(ARGV[1])
local sale_starts = sale[3] ~= '' and tonumber(sale[3]) or nil
local ended = sale[4] ~= '' and now >= tonumber(sale[4])
local limit = tonumber(sale[2])
local remaining = tonumber(sale[1])
local sku_limit = sale[7] and sale[7] ~= '' and tonumber(sale[7]) or nil

-- The SKUs in the spec's order, and each one's stock left.
local ids, position, stock = {}, {}, {}
if sale[6] then
  for id in string.gmatch(sale[6], '([^,=]+)=%d+') do ids[#ids + 1] = id; position[id] = #ids end
else
  ids[1] = 'default'; position.default = 1 -- a sale created before SKUs
end
local single = #ids == 1
if single then
  stock[1] = remaining
else
  local fields = {}
  for i = 1, #ids do fields[i] = 'r:' .. ids[i] end
  local values = hmget(KEYS[1], fields)
  for i = 1, #ids do stock[i] = tonumber(values[i] or '0') end
end

-- The tiers: each one's limit, start and reserve per SKU position, and what
-- its buyers hold of each SKU (read only for a sale with tiers), and the
-- SKU positions whose count this batch changed (`dirty`, a set: one field
-- each however many orders took from it).
local tiers, tier_of, tier_sold = {}, {}, {}
if sale[8] and sale[8] ~= '' then
  for spec in string.gmatch(sale[8], '[^|]+') do
    local name, tier_limit, starts, reserved = string.match(spec, '^([^;]*);([^;]*);([^;]*);(.*)$')
    local tier = {limit = tonumber(tier_limit), starts = tonumber(starts), reserve = {}, dirty = {}}
    for sku, n in string.gmatch(reserved, '([^,=]+)=(%d+)') do tier.reserve[position[sku]] = tonumber(n) end
    tiers[#tiers + 1] = tier; tier_of[name] = #tiers
  end
  local fields = {}
  for t = 1, #tiers do
    for i = 1, #ids do fields[#fields + 1] = 'ts:' .. (t - 1) .. ':' .. ids[i] end
  end
  local values = hmget(KEYS[1], fields)
  for t = 1, #tiers do
    tier_sold[t] = {}
    for i = 1, #ids do tier_sold[t][i] = tonumber(values[(t - 1) * #ids + i] or '0') end
  end
end
-- A sale created with `stock` alone: its orders are recorded as before SKUs.
local plain = single and ids[1] == 'default' and #tiers == 0
local reserves_hold = #tiers > 0 and (not sale[9] or sale[9] == '' or now < tonumber(sale[9]))
-- What a buyer of tier t (nil: none) may take of SKU position i: the common
-- stock left (stock less every reserve less what sales took from it) and
-- what is left of the buyer's own tier's reserve.
local function available(t, i)
  if not reserves_hold then return stock[i] end
  local common = stock[i]
  local own = 0
  for u = 1, #tiers do
    local reserve = tiers[u].reserve[i] or 0
    local taken = tier_sold[u][i]
    common = common - (reserve - math.min(taken, reserve))
    if u == t then own = math.max(reserve - taken, 0) end
  end
  return math.min(math.max(common, 0) + own, stock[i])
end

-- Each purchase's items as {position, quantity} pairs, or why they fit no
-- SKU; `true` for the whole quantity of the only SKU of a sale without
-- tiers or a per-SKU limit (most purchases), decided as before SKUs.
local simple = single and #tiers == 0 and not sku_limit
-- A batch naming no items or tiers (four arguments a purchase) on such a
-- sale needs no table at all.
local wanted = not (simple and stride == 4) and {} or nil
for i = 1, wanted and n or 0 do
  local base = stride * (i - 1) + 4
  local text = items_of(base)
  if text == '' and simple then
    wanted[i] = true
  elseif text == '' then
    if single then wanted[i] = {{1, tonumber(ARGV[base + 1])}} else wanted[i] = {code = 11, value = 0} end
  else
    local items, sum = {}, 0
    for sku, quantity in string.gmatch(text, '([^,=]+)=(%d+)') do
      local at = position[sku]
      if not at then items = {code = 10, value = sku}; break end
      items[#items + 1] = {at, tonumber(quantity)}
      sum = sum + tonumber(quantity)
    end
    if not items.code and (#items == 0 or sum ~= tonumber(ARGV[base + 1])) then
      return redis.error_reply('stockade: malformed items ' .. text)
    end
    wanted[i] = items
  end
end

-- One read of every buyer's holding and every key the batch names.
local holding, users = {}, {}
local known, fields = {}, {}
for i = 1, n do
  local base = stride * (i - 1) + 4
  local user = ARGV[base]
  if holding[user] == nil then holding[user] = false; users[#users + 1] = user end
  if sku_limit and wanted[i] ~= true and not wanted[i].code then
    for _, item in ipairs(wanted[i]) do
      local field = user .. '\n' .. ids[item[1]]
      if holding[field] == nil then holding[field] = false; users[#users + 1] = field end
    end
  end
  local key = ARGV[base + 2]
  if key ~= '' then
    local field = user .. '\n' .. key
    if known[field] == nil then known[field] = false; fields[#fields + 1] = field end
  end
end
if #users > 0 then
  local values = hmget(KEYS[2], users)
  for i = 1, #users do holding[users[i]] = tonumber(values[i] or '0') end
end
if #fields > 0 then
  local values = hmget(KEYS[3], fields)
  for i = 1, #fields do known[fields[i]] = values[i] end
end

local changed_users, new_keys, records, entry = {}, {}, {}, {}
-- A holding as text when it is the argument's own (a buyer's first order),
-- so that it is written without turning the number back into text.
local holding_text = {}
local dirty, dirty_skus = {}, {}
local accepted = 0
local function touch(field)
  if not dirty[field] then dirty[field] = true; changed_users[#changed_users + 1] = field end
end
-- Records an accepted order: the buyer's holding, its key, its record and
-- its outbox entry (as before SKUs for a sale created with `stock` alone).
-- `count` is the quantity as its argument spelled it: the record, the
-- entry and a first holding are written with it, since turning a Lua
-- number back into text is a printf of a double (about 5 % of Redis's
-- time per purchase).
local function record_order(order_id, user, already, quantity, count, key, field, canonical, t, tier)
  remaining = remaining - quantity
  holding[user] = already + quantity
  holding_text[user] = already == 0 and count or nil
  touch(user)
  if field then
    known[field] = order_id
    new_keys[#new_keys + 1] = field
    new_keys[#new_keys + 1] = order_id
  end
  records[#records + 1] = order_id
  entry[#entry + 1] = order_id
  if plain then
    records[#records + 1] = count .. ':l:' .. user
    entry[#entry + 1] = user .. '\n' .. count .. '\n' .. key
  else
    records[#records + 1] = count .. ':l:' .. user .. '\n' .. canonical .. '\n' .. (t and (t - 1) or '')
    entry[#entry + 1] = user .. '\n' .. count .. '\n' .. key .. '\n' .. canonical .. '\n' .. (t and tier or '')
  end
  accepted = accepted + 1
end
for i = 1, n do
  local base = stride * (i - 1) + 4
  local code, value = 1, 0
  local user, key = ARGV[base], ARGV[base + 2]
  local field = key ~= '' and (user .. '\n' .. key) or nil
  local items = wanted == nil or wanted[i]
  local t = stride == 6 and tier_of[ARGV[base + 5]] or nil
  local starts = (t and tiers[t].starts) or sale_starts
  if field and known[field] then
    code, value = 5, known[field]
  elseif items == true then
    -- The only SKU, no tiers, no per-SKU limit: as before SKUs.
    if starts and now < starts then
      code = 6
    elseif ended then
      code = 7
    else
      local quantity = tonumber(ARGV[base + 1])
      local already = holding[user]
      if already + quantity > limit then
        code, value = 4, already
      elseif remaining == 0 then
        code = 2
      elseif remaining < quantity then
        code, value = 3, ids[1] .. '=' .. remaining
      else
        record_order(ARGV[base + 3], user, already, quantity, ARGV[base + 1], key, field,
          not plain and (ids[1] .. '=' .. ARGV[base + 1]) or nil, nil, nil)
        stock[1] = remaining
        value = remaining
      end
    end
  elseif items.code then
    code, value = items.code, items.value
  elseif starts and now < starts then
    code = 6
  elseif ended then
    code = 7
  else
    local quantity = tonumber(ARGV[base + 1])
    local already = holding[user]
    if already + quantity > ((t and tiers[t].limit) or limit) then
      code, value = 4, already
    end
    if code == 1 and sku_limit then
      for _, item in ipairs(items) do
        local held = holding[user .. '\n' .. ids[item[1]]]
        if held + item[2] > sku_limit then
          code, value = 12, ids[item[1]] .. '=' .. held
          break
        end
      end
    end
    if code == 1 then
      for _, item in ipairs(items) do
        local can = available(t, item[1])
        if can < item[2] then
          if remaining == 0 then code = 2 else code, value = 3, ids[item[1]] .. '=' .. can end
          break
        end
      end
    end
    if code == 1 then
      local order_id = ARGV[base + 3]
      local canonical = not plain and {} or nil
      for k, item in ipairs(items) do
        stock[item[1]] = stock[item[1]] - item[2]
        dirty_skus[item[1]] = true
        if t then
          tier_sold[t][item[1]] = tier_sold[t][item[1]] + item[2]
          tiers[t].dirty[item[1]] = true
        end
        if canonical then canonical[k] = ids[item[1]] .. '=' .. item[2] end
        if sku_limit then
          local sku_field = user .. '\n' .. ids[item[1]]
          holding[sku_field] = holding[sku_field] + item[2]
          touch(sku_field)
        end
      end

      record_order(order_id, user, already, quantity, ARGV[base + 1], key, field,
        canonical and table.concat(canonical, ',') or nil, t, tier_of_purchase(base))
      value = remaining
    end
  end
  reply[2 * i] = code
  reply[2 * i + 1] = value
end

if accepted > 0 then
  local sale_changes = {'remaining', remaining}
  if not single then
    for at in pairs(dirty_skus) do
      sale_changes[#sale_changes + 1] = 'r:' .. ids[at]
      sale_changes[#sale_changes + 1] = stock[at]
    end
  end
  for t = 1, #tiers do
    for at in pairs(tiers[t].dirty) do
      sale_changes[#sale_changes + 1] = 'ts:' .. (t - 1) .. ':' .. ids[at]
      sale_changes[#sale_changes + 1] = tier_sold[t][at]
    end
  end
  hset(KEYS[1], sale_changes)
  local changes = {}
  for i = 1, #changed_users do
    changes[2 * i - 1] = changed_users[i]
    changes[2 * i] = holding_text[changed_users[i]] or holding[changed_users[i]]
  end
  hset(KEYS[2], changes)
  if #new_keys > 0 then hset(KEYS[3], new_keys) end
  hset(KEYS[4], records)
  reply[1] = redis.call('XADD', KEYS[5], '*', 'epoch', epoch, 'at', ARGV[1], unpack(entry))
end
return reply
