"""Health and version paths are public, as kube-apiserver's system:public-info-viewer: anonymous
clients (no certificate, no token) may get /healthz, /livez, /readyz, their checks and /version;
everything else answers them 401."""
import json

import pytest


@pytest.fixture(scope="module")
def anon(apiserver):
    a = apiserver.api(with_client_cert=False)
    yield a
    a.close()


@pytest.mark.parametrize("path", ["/healthz", "/livez", "/readyz", "/healthz/ping", "/livez/ping", "/readyz/ping",
                                  "/readyz/etcd", "/livez/log"])
def test_anonymous_health(anon, path):
    r = anon.get(path)
    assert r.status == 200 and r.body == b"ok", (path, r)


def test_anonymous_health_verbose(anon):
    r = anon.get("/healthz?verbose")
    assert r.status == 200 and b"healthz check passed" in r.body, r


def test_anonymous_unknown_check_is_not_found(anon):
    r = anon.get("/healthz/no-such-check")
    assert r.status == 404, r


def test_anonymous_version(anon):
    for path in ("/version", "/version/"):
        r = anon.get(path)
        assert r.status == 200, (path, r)
        assert "gitVersion" in json.loads(r.body), r


@pytest.mark.parametrize("path", ["/healthzx", "/livez-ping", "/metrics", "/api", "/api/v1/nodes", "/versionx"])
def test_anonymous_elsewhere_is_unauthorized(anon, path):
    r = anon.get(path)
    assert r.status == 401, (path, r)


def test_authenticated_health_checks(api):
    for path in ("/healthz/ping", "/livez/ping", "/readyz/ping"):
        r = api.get(path)
        assert r.status == 200 and r.body == b"ok", (path, r)
