-- wrk script: each node renews its own Lease, as the kubelet does: unconditional PUTs of
-- kube-node-lease/bench-N with the bearer token NODE_TOKEN_PREFIX..N (a static token user
-- system:node:bench-N in system:nodes), so the Node authorizer and NodeRestriction judge every
-- request as a node's. env: NODE_TOKEN_PREFIX (required), LEASE_COUNT (default 64)
local prefix = os.getenv("NODE_TOKEN_PREFIX") or error("NODE_TOKEN_PREFIX not set")
local count = tonumber(os.getenv("LEASE_COUNT") or "64")
local threads = 0

function setup(thread)
  thread:set("offset", threads * 7919)
  threads = threads + 1
end

local i = 0
function request()
  i = i + 1
  local n = (i + offset) % count
  local name = "bench-" .. n
  local now = os.time()
  local renew = os.date("!%Y-%m-%dT%H:%M:%S", now) .. string.format(".%06dZ", (i * 37) % 1000000)
  local body = '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"' .. name ..
      '","namespace":"kube-node-lease"},"spec":{"holderIdentity":"' .. name ..
      '","leaseDurationSeconds":40,"renewTime":"' .. renew .. '"}}'
  local headers = { ["Authorization"] = "Bearer " .. prefix .. n, ["Content-Type"] = "application/json",
                    ["Accept"] = "application/json" }
  return wrk.format("PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" .. name, headers, body)
end
