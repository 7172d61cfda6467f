-- Settles a reservation. KEYS[1]: the ticket's spend record. ARGV: the
-- reservation's value, the spent value ('' to remove the reservation: the
-- purchase was refused or failed). A record that is no longer this
-- reservation is left alone. Reply: 1 if settled, 0 if not.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
end
return 1
