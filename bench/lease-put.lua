-- wrk script: unconditional PUTs (no resourceVersion in the body) of Leases, cycling over
-- LEASE_COUNT pre-created leases bench-0..N-1 in LEASE_NS, with a static Bearer token.
-- Each wrk thread starts at a different offset so concurrent connections spread over the leases.
-- env: KITE_TOKEN (required), LEASE_NS (default "default"), LEASE_COUNT (default 64)
local token = os.getenv("KITE_TOKEN") or error("KITE_TOKEN not set")
local ns = os.getenv("LEASE_NS") or "default"
local count = tonumber(os.getenv("LEASE_COUNT") or "64")
local threads = 0

function setup(thread)
  thread:set("offset", threads * 7919)
  threads = threads + 1
end

local i = 0
local headers = { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json",
                  ["Accept"] = "application/json" }

function request()
  i = i + 1
  local name = "bench-" .. ((i + offset) % count)
  local now = os.time()
  -- a MicroTime as the kubelet sends (the microseconds vary so every PUT changes the object)
  local renew = os.date("!%Y-%m-%dT%H:%M:%S", now) .. string.format(".%06dZ", (i * 37) % 1000000)
  local body = '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"' .. name ..
      '","namespace":"' .. ns .. '"},"spec":{"holderIdentity":"' .. name ..
      '","leaseDurationSeconds":40,"renewTime":"' .. renew .. '"}}'
  return wrk.format("PUT", "/apis/coordination.k8s.io/v1/namespaces/" .. ns .. "/leases/" .. name, headers, body)
end
