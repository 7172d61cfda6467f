-- Purchases of one sale, every request a distinct buyer:
--   wrk -s purchase.lua URL -- SALE_ID RUN_TAG [scattered]
-- Buyers are RUN_TAG-<thread>-<counter>, so no two requests of a run (or
-- of two runs with different tags) name the same buyer. With `scattered`,
-- each buyer starts with its counter scrambled (a bijection, so still
-- distinct): real buyers' ids land all over the store's indexes, not at
-- their end as counted names do.
dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "common.lua")

local path, prefix, scattered
local counter = 0

function init(args)
  path = "/v1/sales/" .. args[1] .. "/purchases"
  prefix = args[2] .. "-" .. thread_id .. "-"
  scattered = args[3] == "scattered"
end

function request()
  counter = counter + 1
  local buyer = prefix .. counter
  if scattered then
    -- Multiplying by an odd constant modulo 2^32 permutes the counters.
    buyer = string.format("%08x-", (counter * 2654435761) % 4294967296) .. buyer
  end
  return wrk.format("POST", path, nil, '{"user_id":"' .. buyer .. '"}')
end
