-- wrk script of make bench's serve-under-load workload (Tests/Scripts/bench.sh, BENCH_ONLY=wrk):
-- each request a random 1 MiB range (bytes=A-B, A anywhere in the file) of one of the videos
-- whose paths WRK_PATHS lists, one a line (all WRK_SIZE bytes long), from a seeded generator per
-- thread (WRK_SEED), so nginx and the proxy are asked the same sequence. At the end it prints one
-- line: "requests N errors N p50_us N p99_us N rps N" (errors: non-2xx statuses, socket errors
-- and timeouts together).
local paths, size, span = {}, tonumber(os.getenv("WRK_SIZE")), 1048576
for line in io.lines(os.getenv("WRK_PATHS")) do paths[#paths + 1] = line end
local threads, counter = {}, 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

function init(args)
  math.randomseed(tonumber(os.getenv("WRK_SEED") or "1") * 1000 + id)
end

function request()
  local a = math.random(0, size - span)
  return wrk.format("GET", paths[math.random(#paths)], { ["Range"] = "bytes=" .. a .. "-" .. (a + span - 1) })
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("requests %d errors %d p50_us %d p99_us %d rps %.1f\n", summary.requests,
    e.connect + e.read + e.write + e.status + e.timeout, latency:percentile(50), latency:percentile(99),
    summary.requests / (summary.duration / 1e6)))
end
