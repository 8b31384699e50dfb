-- wrk script: GET of one Lease (bench-0 in LEASE_NS) with a static Bearer token. No request()
-- function: wrk formats the request once, as for the nginx baseline.
-- env: KITE_TOKEN (required), LEASE_NS (default "default")
local token = os.getenv("KITE_TOKEN") or error("KITE_TOKEN not set")
local ns = os.getenv("LEASE_NS") or "default"
wrk.method = "GET"
wrk.path = "/apis/coordination.k8s.io/v1/namespaces/" .. ns .. "/leases/bench-0"
wrk.headers["Authorization"] = "Bearer " .. token
wrk.headers["Accept"] = "application/json"
