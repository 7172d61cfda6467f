-- A purchase with this admission was decided: no longer outstanding, and
-- counted as used (once). ARGV: ticket.
if redis.call('ZREM', KEYS[5], ARGV[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'used', 1)
end
return {}
