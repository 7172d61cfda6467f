-- wrk script: joins with a distinct buyer per request.
local thread_id = 0
function setup(thread)
  thread_id = thread_id + 1
  thread:set("prefix", "t" .. thread_id .. "-")
end
local n = 0
function request()
  n = n + 1
  return wrk.format("POST", "/v1/sales/bench/queue",
    { ["Content-Type"] = "application/json" },
    '{"user_id":"' .. prefix .. n .. '"}')
end
