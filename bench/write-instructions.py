"""Writes for bench/write-instructions.sh over one keep-alive connection: PORT TOKEN setup|lease|node N."""
import http.client
import json
import ssl
import sys

port, token, what, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
ctx = ssl.create_default_context()
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=120)
H = {"Authorization": "Bearer " + token, "Accept": "application/json", "User-Agent": "kubelet/v1.32.0"}
CONDS = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")


def call(method, path, body, ctype, ok):
    conn.request(method, path, json.dumps(body), dict(H, **{"Content-Type": ctype}))
    r = conn.getresponse()
    r.read()
    assert r.status in ok, (method, path, r.status)


def status(name):
    return {"conditions": [{"type": t, "status": "True" if t == "Ready" else "False", "reason": "R", "message": "m",
                            "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                           for t in CONDS],
            "addresses": [{"type": "InternalIP", "address": "10.1.1.1"}, {"type": "Hostname", "address": name}],
            "capacity": {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6", "osImage": "Debian",
                         "containerRuntimeVersion": "runc://1", "kubeletVersion": "v1.32.0", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"},
            "images": [{"names": [f"registry.example/img-{j}@sha256:{j:064d}", f"registry.example/img-{j}:v1"],
                        "sizeBytes": 1000000 + j} for j in range(20)]}


for i in range(n):
    if what == "setup":
        call("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
             {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": f"bench-{i}"},
              "spec": {"holderIdentity": f"bench-{i}", "leaseDurationSeconds": 40}}, "application/json", (201, 409))
        call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"bn-{i}",
             "labels": {"kubernetes.io/hostname": f"bn-{i}"}}, "spec": {"podCIDR": "10.0.0.0/24"}},
             "application/json", (201, 409))
        call("PATCH", f"/api/v1/nodes/bn-{i}/status", {"status": status(f"bn-{i}")},
             "application/strategic-merge-patch+json", (200,))
    elif what == "lease":
        name = f"bench-{i % 64}"
        call("PUT", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}",
             {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
              "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                       "renewTime": "2026-01-01T00:%02d:%02d.%06dZ" % (i // 60 % 60, i % 60, i)}},
             "application/json", (200,))
    else:
        hb = "2026-01-01T%02d:%02d:%02dZ" % (i // 3600 % 24, i // 60 % 60, i % 60)
        call("PATCH", f"/api/v1/nodes/bn-{i % 64}/status",
             {"status": {"$setElementOrder/conditions": [{"type": t} for t in CONDS],
                         "conditions": [{"type": t, "lastHeartbeatTime": hb} for t in CONDS]}},
             "application/strategic-merge-patch+json", (200,))
