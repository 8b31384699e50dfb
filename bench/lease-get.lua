-- wrk script: GET of one Lease (bench-0 in LEASE_NS) with a static Bearer token.
-- env: KITE_TOKEN (required), LEASE_NS (default "default")
local token = os.getenv("KITE_TOKEN") or error("KITE_TOKEN not set")
local ns = os.getenv("LEASE_NS") or "default"
local path = "/apis/coordination.k8s.io/v1/namespaces/" .. ns .. "/leases/bench-0"
local headers = { ["Authorization"] = "Bearer " .. token, ["Accept"] = "application/json" }

function request()
  return wrk.format("GET", path, headers)
end
