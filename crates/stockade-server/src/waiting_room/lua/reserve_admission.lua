-- Reserves an admission for one purchase. KEYS[1]: the ticket's spend
-- record. ARGV: the reservation's value, ms to keep the record (until the
-- token can no longer be used). Reply: nil when reserved, else the record
-- found (a purchase in flight with the token, or the one that spent it).
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return false
end
return redis.call('GET', KEYS[1])
