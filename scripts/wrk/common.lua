-- Shared by the phase scripts of scripts/bench-http (loaded with dofile):
-- numbers wrk's threads, counts the answers by status in each thread, and
-- prints one JSON line at the end that the script reads.
--
-- Each phase script defines init(args) and request(); `thread_id` (0, 1,
-- ...) is set in every thread before init runs.

local threads = {}
local next_thread = 0

function setup(thread)
  thread:set("thread_id", next_thread)
  next_thread = next_thread + 1
  table.insert(threads, thread)
end

-- Per thread: answers by status. Only the status is read (the body is
-- the server's business; the checks after the phase read the service).
statuses = {}

function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
  local total = {}
  for _, thread in ipairs(threads) do
    for status, count in pairs(thread:get("statuses")) do
      total[status] = (total[status] or 0) + count
    end
  end
  local parts = {}
  for status, count in pairs(total) do
    table.insert(parts, string.format('"%d":%d', status, count))
  end
  io.write(string.format(
    '@bench-http {"requests":%d,"seconds":%.6f,"bytes_read":%d,"p50_us":%d,"p99_us":%d,' ..
    '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"timeouts":%d,"statuses":{%s}}\n',
    summary.requests, summary.duration / 1e6, summary.bytes, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.timeout,
    table.concat(parts, ",")))
end

wrk.headers["Content-Type"] = "application/json"
