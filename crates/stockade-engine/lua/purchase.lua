-- Decides one purchase in one atomic step: sale exists, epoch, idempotency
-- key, window, per-user limit, stock; then records the order and appends it to
-- the outbox stream. Stock is checked before it is changed, so it is never
-- decremented and restored, and never negative.
-- KEYS[1]  sale hash       (total, limit, starts, ends, hold, remaining, epoch)
-- KEYS[2]  holdings hash   (user id -> items held)
-- KEYS[3]  keys hash       (user id .. "\n" .. idempotency key -> order id;
--                           keys are scoped to their buyer)
-- KEYS[4]  orders hash     (order id -> "quantity:state:user id", state l=live r=released)
-- KEYS[5]  outbox stream   (one entry per accepted, unacknowledged order)
-- KEYS[6]  pending hash    (order id -> its outbox entry id)
-- ARGV     user id, quantity, idempotency key ('' for none), new order id, now (ms),
--          the epoch the caller believes the sale is under
-- Returns  {code, number, text}:
--   1 purchased (remaining), 2 sold out, 3 insufficient stock (remaining),
--   4 limit exceeded (already held), 5 duplicate (text = original order id),
--   6 not started, 7 ended, 8 unknown sale, 9 wrong epoch (number = the
--   epoch held; 0 while a rebuild is under way)
local sale = redis.call('HMGET', KEYS[1], 'remaining', 'limit', 'starts', 'ends', 'epoch')
if not sale[1] then return {8, 0, ''} end
if sale[5] ~= ARGV[6] then return {9, tonumber(sale[5] or '0'), ''} end

local key = ARGV[3]
local key_field = ARGV[1] .. '\n' .. key
if key ~= '' then
  local original = redis.call('HGET', KEYS[3], key_field)
  if original then return {5, 0, original} end
end

local now = tonumber(ARGV[5])
if sale[3] ~= '' and now < tonumber(sale[3]) then return {6, 0, ''} end
if sale[4] ~= '' and now >= tonumber(sale[4]) then return {7, 0, ''} end

local user = ARGV[1]
local quantity = tonumber(ARGV[2])
local already = tonumber(redis.call('HGET', KEYS[2], user) or '0')
if already + quantity > tonumber(sale[2]) then return {4, already, ''} end

local remaining = tonumber(sale[1])
if remaining == 0 then return {2, 0, ''} end
if remaining < quantity then return {3, remaining, ''} end

local order_id = ARGV[4]
remaining = redis.call('HINCRBY', KEYS[1], 'remaining', -quantity)
redis.call('HINCRBY', KEYS[2], user, quantity)
if key ~= '' then redis.call('HSET', KEYS[3], key_field, order_id) end
redis.call('HSET', KEYS[4], order_id, quantity .. ':l:' .. user)
local entry = redis.call('XADD', KEYS[5], '*',
  'order_id', order_id, 'user_id', user, 'quantity', quantity,
  'idempotency_key', key, 'created_at_ms', ARGV[5], 'epoch', ARGV[6])
redis.call('HSET', KEYS[6], order_id, entry)
return {1, remaining, order_id}
