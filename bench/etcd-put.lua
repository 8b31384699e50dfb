-- wrk script: etcd's own puts through its JSON gateway (POST /v3/kv/put), the load
-- bench/lease-put.lua puts on kite: LEASE_COUNT keys /registry/leases/default/bench-0..N-1 in
-- turn, each value a Lease as kite stores it (VALUE_BYTES bytes, default 420) whose renewTime
-- changes on every put. Each wrk thread starts at a different offset, as lease-put.lua's.
-- env: LEASE_COUNT (default 64), VALUE_BYTES (default 420)
local count = tonumber(os.getenv("LEASE_COUNT") or "64")
local vbytes = tonumber(os.getenv("VALUE_BYTES") or "420")
local threads = 0

-- base64 (wrk's LuaJIT has no library for it)
local b64chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function b64(data)
  return ((data:gsub(".", function(x)
    local r, b = "", x:byte()
    for i = 8, 1, -1 do r = r .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and "1" or "0") end
    return r
  end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
    if #x < 6 then return "" end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
    return b64chars:sub(c + 1, c + 1)
  end) .. ({ "", "==", "=" })[#data % 3 + 1])
end

function setup(thread)
  thread:set("offset", threads * 7919)
  threads = threads + 1
end

-- the keys and, per key, a few values ready encoded (encoding per request would make wrk, not
-- etcd, the bottleneck): the value's renewTime differs between them
local keys, values = {}, {}
function init(args)
  for k = 0, count - 1 do
    local name = "bench-" .. k
    keys[k] = b64("/registry/leases/default/" .. name)
    values[k] = {}
    for v = 0, 7 do
      local body = '{"kind":"Lease","apiVersion":"coordination.k8s.io/v1","metadata":{"name":"' .. name ..
          '","namespace":"default","uid":"00000000-0000-0000-0000-000000000000",' ..
          '"creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"holderIdentity":"' .. name ..
          '","leaseDurationSeconds":40,"renewTime":"2026-01-01T00:00:00.00000' .. v .. 'Z"}}'
      if #body < vbytes then body = body .. string.rep(" ", vbytes - #body) end
      values[k][v] = '{"key":"' .. keys[k] .. '","value":"' .. b64(body) .. '"}'
    end
  end
end

local i = 0
local headers = { ["Content-Type"] = "application/json" }

function request()
  i = i + 1
  local k = (i + offset) % count
  return wrk.format("POST", "/v3/kv/put", headers, values[k][i % 8])
end
