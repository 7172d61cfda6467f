-- Polls of waiting-room tickets, round robin over the tickets given:
--   wrk -s poll.lua URL -- TICKET[,TICKET...]
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

local requests = {}
local next_request = 0

function init(args)
  for ticket in string.gmatch(args[1], "[^,]+") do
    table.insert(requests, wrk.format("GET", "/v1/queue/" .. ticket))
  end
  -- Threads start at different tickets.
  next_request = thread_id % #requests
end

function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end
