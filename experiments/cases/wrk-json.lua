-- wrk's `done` hook: one JSON line after wrk's own text, read by the case's SLO file.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests_per_s": %.3f, "latency_p50_us": %d, "latency_p99_us": %d, "requests": %d, "errors": %d}\n',
    summary.requests / (summary.duration / 1e6), latency:percentile(50), latency:percentile(99),
    summary.requests, e.connect + e.read + e.write + e.status + e.timeout))
end
