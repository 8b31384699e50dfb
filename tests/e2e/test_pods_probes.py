"""Probes on real containers under runc: an exec readiness probe holds Ready until it passes,
an httpGet readiness probe on a named port (hostNetwork pod: the agent dials the host's IP), a
tcpSocket liveness probe that fails kills and restarts the container with the kubelet's
Killing and Unhealthy events. Needs root, runc, conmon and umoci (the cluster fixture skips)."""
import time

from conftest import free_port
from test_pods_run import NS, cluster, cond, cstatus, events, get, sh, status_of, wait  # noqa: F401


def create(c, name, containers, host_network=False, restart="Always"):
    spec = {"nodeName": c.node, "restartPolicy": restart, "containers": containers,
            "terminationGracePeriodSeconds": 2}
    if host_network:
        spec["hostNetwork"] = True
    c.api().ok("POST", f"/api/v1/namespaces/{NS}/pods",
               {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def delete(c, name):
    c.api().delete(f"/api/v1/namespaces/{NS}/pods/{name}")
    wait(lambda: get(c, name) is None, 30, f"{name} gone")


def test_exec_readiness(cluster):
    c = cluster
    probe = {"exec": {"command": ["test", "-f", "/tmp/ready"]}, "periodSeconds": 1}
    create(c, "rd", [sh("c", "sleep 3; touch /tmp/ready; exec sleep 3600", readinessProbe=probe)])
    st = wait(lambda: (s := status_of(c, "rd")).get("phase") == "Running" and s, 15, "rd Running")
    assert cstatus(st, "c")["ready"] is False and cond(st, "Ready") == "False"
    assert cstatus(st, "c")["started"] is True
    t0 = time.monotonic()
    st = wait(lambda: cond(s := status_of(c, "rd"), "Ready") == "True" and s, 15, "rd Ready")
    assert cstatus(st, "c")["ready"] is True
    assert time.monotonic() - t0 < 8, "a probe result reaches the status at once, not at a resync"
    msgs = [e["message"] for e in events(c, "rd") if e["reason"] == "Unhealthy"]
    assert any(m.startswith("Readiness probe failed") for m in msgs), msgs
    delete(c, "rd")


def test_http_readiness_named_port(cluster):
    c = cluster
    port = free_port()
    probe = {"httpGet": {"path": "/ok.html", "port": "web"}, "periodSeconds": 1}
    script = f"mkdir -p /www; echo ok > /www/ok.html; exec httpd -f -p {port} -h /www"
    create(c, "web", [sh("c", script, readinessProbe=probe, ports=[{"name": "web", "containerPort": port}])],
           host_network=True)
    st = wait(lambda: cond(s := status_of(c, "web"), "Ready") == "True" and s, 20, "web Ready")
    assert cstatus(st, "c")["ready"] is True
    delete(c, "web")


def test_tcp_liveness_restarts(cluster):
    c = cluster
    port = free_port()  # nothing listens there
    probe = {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 2,
             "terminationGracePeriodSeconds": 1}
    create(c, "live", [sh("c", "exec sleep 3600", livenessProbe=probe)], host_network=True)
    st = wait(lambda: cstatus(s := status_of(c, "live"), "c").get("restartCount", 0) >= 1 and s, 30,
              "a restart after the liveness probe failed")
    last = cstatus(st, "c")["lastState"]["terminated"]
    assert last["exitCode"] in (137, 143), last
    ev = events(c, "live")
    assert any(e["reason"] == "Killing" and e["message"] == "Container c failed liveness probe, will be restarted"
               for e in ev), [(e["reason"], e["message"]) for e in ev]
    unhealthy = [e["message"] for e in ev if e["reason"] == "Unhealthy"]
    assert any(m.startswith("Liveness probe failed: dial tcp ") and "connection refused" in m for m in unhealthy), \
        unhealthy
    delete(c, "live")
