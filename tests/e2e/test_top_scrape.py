"""The metrics API's scraper against agents the test plays (HTTPS servers speaking the kubelet's
/metrics/resource), on a bare `kite apiserver`: the CPU rate and window come from the samples'
own counters and timestamps, whatever the scrape timing; a node that is not Ready, an agent that
answers too much or too slowly, and one that stops answering are left out while the others are
served. No root needed."""
import http.server
import socketserver
import ssl
import subprocess
import threading
import time

import pytest

from conftest import Cluster, node_manifest, wait_for

MiB = 1 << 20


class Agent:
    """An HTTPS server answering GET /metrics/resource; sample i carries counters i * cpu_step
    seconds at base + i * step_ms. mode: 'ok', 'huge' (17 MiB), 'slow' (answers after 5 s),
    'down' (refuses the connection after start)."""

    def __init__(self, workdir, mode="ok", node_cpu_step=1.0, ctr_cpu_step=0.25, step_ms=2000):
        self.mode, self.i, self.paths, self.certs = mode, 0, [], []
        self.node_cpu_step, self.ctr_cpu_step, self.step_ms = node_cpu_step, ctr_cpu_step, step_ms
        self.base_ms = int(time.time() * 1000) - 60000
        key, crt = workdir / f"agent-{id(self)}.key", workdir / f"agent-{id(self)}.crt"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-keyout", str(key), "-out", str(crt), "-days", "1", "-subj", "/CN=fake-agent"],
                       check=True, capture_output=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(crt), str(key))
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(str(workdir / "data" / "pki" / "ca.crt"))
        agent = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                agent.paths.append(self.path)
                agent.certs.append(self.connection.getpeercert().get("subject") if self.connection.getpeercert() else None)
                if agent.mode == "slow":
                    time.sleep(5)
                body = agent.text().encode() if agent.mode != "huge" else b"# " + b"x" * (17 * MiB) + b"\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def text(self):
        i = self.i
        self.i += 1
        ts = self.base_ms + i * self.step_ms
        lbl = 'container="app",namespace="default",pod="p1"'
        return (f"# TYPE container_cpu_usage_seconds_total counter\n"
                f"container_cpu_usage_seconds_total{{{lbl}}} {i * self.ctr_cpu_step} {ts}\n"
                f"container_memory_working_set_bytes{{{lbl}}} {50 * MiB} {ts}\n"
                f"container_start_time_seconds{{{lbl}}} 1.7e+09 {ts}\n"
                f"node_cpu_usage_seconds_total {i * self.node_cpu_step} {ts}\n"
                f"node_memory_working_set_bytes {2048 * MiB} {ts}\n"
                f"resource_scrape_error 0\n")

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster("apiserver", tmp_path_factory.mktemp("topscrape"), extra_args=["--metric-resolution", "1s"]).start()
    yield c
    c.stop()


def fake_node(c, name, agent, ready="True", labels=None):
    n = node_manifest(name, ready=ready, labels=labels)
    n["status"]["addresses"] = [{"type": "InternalIP", "address": "127.0.0.1"}]
    n["status"]["daemonEndpoints"] = {"kubeletEndpoint": {"Port": agent.port}}
    c.api().ok("POST", "/api/v1/nodes", n)


def test_rate_window_and_what_is_left_out(cluster):
    c, api = cluster, cluster.api()
    good = Agent(c.workdir)
    agents = {"huge": Agent(c.workdir, "huge"), "slow": Agent(c.workdir, "slow"), "notready": Agent(c.workdir)}
    fake_node(c, "fake-good", good, labels={"pool": "a"})
    fake_node(c, "fake-huge", agents["huge"], labels={"pool": "a"})
    fake_node(c, "fake-slow", agents["slow"], labels={"pool": "a"})
    fake_node(c, "fake-notready", agents["notready"], ready="False", labels={"pool": "a"})
    api.ok("POST", "/api/v1/namespaces/default/pods",
           {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "labels": {"app": "x"}},
            "spec": {"nodeName": "fake-good", "containers": [{"name": "app", "image": "busybox"}]}})
    try:
        nm = wait_for(lambda: (r := api.get("/apis/metrics.k8s.io/v1beta1/nodes/fake-good")).status == 200 and r.json(),
                      20, what="fake-good's NodeMetrics")
        # 1 s of CPU per 2 s of the samples' own time, whatever the scrape period
        assert nm["usage"]["cpu"] == "500m" and nm["window"] == "2s", nm
        assert nm["usage"]["memory"] == "2Gi", nm
        assert nm["metadata"]["labels"]["pool"] == "a"
        pm = api.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/p1").json()
        assert pm["containers"] == [{"name": "app", "usage": {"cpu": "125m", "memory": "50Mi"}}], pm
        assert pm["window"] == "2s" and pm["metadata"]["labels"] == {"app": "x"}, pm
        # the API server's kubelet-client certificate, on the kubelet's path
        assert good.paths[0] == "/metrics/resource"
        assert ((("commonName", "kube-apiserver-kubelet-client"),) in (good.certs[0] or ())), good.certs[0]
        # a few more scrapes: the others never show (not Ready, too big, too slow), the good one still does
        n = good.i
        wait_for(lambda: good.i >= n + 3, 20, what="three more scrapes")
        # (waited for: a scrape of the good one that timed out on a loaded machine drops its
        # samples until two more have come, as a failed scrape does)
        lst = wait_for(lambda: (l := api.get("/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=pool%3Da").json())["items"]
                       and l, 10, what="the pool's NodeMetrics")
        assert [i["metadata"]["name"] for i in lst["items"]] == ["fake-good"], lst
        assert agents["notready"].paths == []  # a node that is not Ready is not asked
        assert agents["huge"].paths and agents["slow"].paths
        assert api.get("/apis/metrics.k8s.io/v1beta1/nodes?labelSelector=pool%3Db").json()["items"] == []
        # an agent that stops answering loses its node's metrics at the next scrape
        good.stop()
        wait_for(lambda: api.get("/apis/metrics.k8s.io/v1beta1/nodes/fake-good").status == 404, 20,
                 what="fake-good gone from the metrics")
        assert api.get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods").json()["items"] == []
    finally:
        for a in agents.values():
            a.stop()
        for name in ("fake-good", "fake-huge", "fake-slow", "fake-notready"):
            api.delete(f"/api/v1/nodes/{name}")
