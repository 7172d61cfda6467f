-- wrk script: joins with a distinct buyer per request (distinct across runs
-- too, so every join queues a new buyer: 201, never the 200 of a re-join).
local thread_id = 0
function setup(thread)
  thread_id = thread_id + 1
  thread:set("prefix", "t" .. thread_id .. "-" .. os.time() .. "-")
end
local n = 0
function request()
  n = n + 1
  return wrk.format("POST", "/v1/sales/bench/queue",
    { ["Content-Type"] = "application/json" },
    '{"user_id":"' .. prefix .. n .. '"}')
end
