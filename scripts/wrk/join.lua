-- Joins of one sale's waiting room, every request a distinct buyer:
--   wrk -s join.lua URL -- SALE_ID RUN_TAG
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

local path, prefix
local counter = 0

function init(args)
  path = "/v1/sales/" .. args[1] .. "/queue"
  prefix = '{"user_id":"' .. args[2] .. "-" .. thread_id .. "-"
end

function request()
  counter = counter + 1
  return wrk.format("POST", path, nil, prefix .. counter .. '"}')
end
