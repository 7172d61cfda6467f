-- Creates a sale under the first epoch (1), or reports that it exists
-- (identical) or conflicts.
-- KEYS[1]  the sale hash
-- ARGV     total, per-user limit, starts (ms or ''), ends (ms or ''), hold (ms or '')
-- Returns  {'created'} | {'exists'} | {'conflict', total, limit, starts, ends, hold}
local fields = {'total', 'limit', 'starts', 'ends', 'hold'}
local existing = redis.call('HMGET', KEYS[1], unpack(fields))
if existing[1] then
  for i = 1, #fields do
    if existing[i] ~= ARGV[i] then
      return {'conflict', existing[1], existing[2], existing[3], existing[4], existing[5]}
    end
  end
  return {'exists'}
end
redis.call('HSET', KEYS[1],
  'total', ARGV[1], 'limit', ARGV[2], 'starts', ARGV[3], 'ends', ARGV[4], 'hold', ARGV[5],
  'remaining', ARGV[1], 'epoch', '1', 'newest', '1')
return {'created'}
