-- Purchases of one sale, every request a distinct buyer:
--   wrk -s purchase.lua URL -- SALE_ID RUN_TAG
-- Buyers are RUN_TAG-<thread>-<counter>, so no two requests of a run (or
-- of two runs with different tags) name the same buyer.
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

local path, prefix
local counter = 0

function init(args)
  path = "/v1/sales/" .. args[1] .. "/purchases"
  prefix = '{"user_id":"' .. args[2] .. "-" .. thread_id .. "-"
end

function request()
  counter = counter + 1
  return wrk.format("POST", path, nil, prefix .. counter .. '"}')
end
