-- Decides a batch of purchases of one sale in one atomic step, each in
-- arrival order with the rules of a single purchase: sale exists, epoch,
-- idempotency key, window, per-user limit, stock. Stock is checked before it
-- is changed, so it is never decremented and restored, and never negative.
--
-- The work is per batch, not per purchase: one read of the sale, one read of
-- the buyers' holdings and of the keys, one write of each, and ONE outbox
-- entry carrying every accepted order of the batch. Per purchase there is
-- only Lua arithmetic and a field in each write.
--
-- KEYS[1]  sale hash       (total, limit, starts, ends, hold, remaining, epoch)
-- KEYS[2]  holdings hash   (user id -> items held)
-- KEYS[3]  keys hash       (user id .. "\n" .. idempotency key -> order id;
--                           keys are scoped to their buyer)
-- KEYS[4]  orders hash     (order id -> "quantity:state:user id", state l=live r=released)
-- KEYS[5]  outbox stream   (one entry per batch that accepted an order, until
--                           acknowledged as committed to the store)
-- ARGV[1]  now (ms), ARGV[2] the number of purchases n, ARGV[3] the epoch the
--          callers believe the sale is under, then four per purchase: user
--          id, quantity, idempotency key ('' for none), new order id
-- Returns  {entry id or '', code1, value1, code2, value2, ...}, per purchase:
--   1 purchased (remaining), 2 sold out (0), 3 insufficient stock (remaining),
--   4 limit exceeded (already held), 5 duplicate (the original order id),
--   6 not started, 7 ended, 8 unknown sale, 9 wrong epoch (the epoch held;
--   0 while a rebuild is under way)
-- Outbox entry fields: 'epoch', 'at' (ms), then per accepted order:
--   order id -> user id .. "\n" .. quantity .. "\n" .. idempotency key
local n = tonumber(ARGV[2])
local reply = {''}
local sale = redis.call('HMGET', KEYS[1], 'remaining', 'limit', 'starts', 'ends', 'epoch')
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
local not_started = sale[3] ~= '' and now < tonumber(sale[3])
local ended = sale[4] ~= '' and now >= tonumber(sale[4])
local limit = tonumber(sale[2])
local remaining = tonumber(sale[1])

-- One read of every buyer's holding and every key the batch names.
local holding, users = {}, {}
local known, fields = {}, {}
for i = 1, n do
  local base = 4 * i
  local user = ARGV[base]
  if holding[user] == nil then holding[user] = false; users[#users + 1] = user end
  local key = ARGV[base + 2]
  if key ~= '' then
    local field = user .. '\n' .. key
    if known[field] == nil then known[field] = false; fields[#fields + 1] = field end
  end
end
if #users > 0 then
  local values = redis.call('HMGET', KEYS[2], unpack(users))
  for i = 1, #users do holding[users[i]] = tonumber(values[i] or '0') end
end
if #fields > 0 then
  local values = redis.call('HMGET', KEYS[3], unpack(fields))
  for i = 1, #fields do known[fields[i]] = values[i] end
end

local changed_users, new_keys, records, entry = {}, {}, {}, {}
local dirty = {}
local accepted = 0
for i = 1, n do
  local base = 4 * i
  local code, value = 1, 0
  local user, key = ARGV[base], ARGV[base + 2]
  local field = key ~= '' and (user .. '\n' .. key) or nil
  if field and known[field] then
    code, value = 5, known[field]
  elseif not_started then
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
      code, value = 3, remaining
    else
      local order_id = ARGV[base + 3]
      remaining = remaining - quantity
      holding[user] = already + quantity
      if not dirty[user] then dirty[user] = true; changed_users[#changed_users + 1] = user end
      if field then
        known[field] = order_id
        new_keys[#new_keys + 1] = field
        new_keys[#new_keys + 1] = order_id
      end
      records[#records + 1] = order_id
      records[#records + 1] = quantity .. ':l:' .. user
      entry[#entry + 1] = order_id
      entry[#entry + 1] = user .. '\n' .. quantity .. '\n' .. key
      accepted = accepted + 1
      value = remaining
    end
  end
  reply[2 * i] = code
  reply[2 * i + 1] = value
end

if accepted > 0 then
  redis.call('HSET', KEYS[1], 'remaining', remaining)
  local changes = {}
  for i = 1, #changed_users do
    changes[2 * i - 1] = changed_users[i]
    changes[2 * i] = holding[changed_users[i]]
  end
  redis.call('HSET', KEYS[2], unpack(changes))
  if #new_keys > 0 then redis.call('HSET', KEYS[3], unpack(new_keys)) end
  redis.call('HSET', KEYS[4], unpack(records))
  reply[1] = redis.call('XADD', KEYS[5], '*', 'epoch', epoch, 'at', ARGV[1], unpack(entry))
end
return reply
