"""Pod Security admission as kube-apiserver's PodSecurity plugin: the namespace labels
pod-security.kubernetes.io/{enforce,audit,warn}[-version] choose the policy, enforce refuses a
pod with upstream's exact message, warn answers Warning headers (also for the pod templates of
workloads, which are never enforced), audit annotates the audit event; `kite up` enforces
baseline where no label says otherwise, `kite apiserver` upstream's privileged. Driven by the
machine's kubectl and python3-kubernetes."""
import json
import time

import pytest
import yaml

from conftest import KITE, Cluster, KiteProcess, wait_for

# The pod: everything a user needs to take the host.
ESCALATE = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "escalate"},
    "spec": {"hostPID": True, "hostNetwork": True,
             "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "3600"],
                             "securityContext": {"privileged": True, "runAsUser": 0},
                             "volumeMounts": [{"name": "host", "mountPath": "/host"}]}],
             "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}}

BASELINE_FAILS = ('host namespaces (hostNetwork=true, hostPID=true), hostPath volumes (volume "host"), '
                  'privileged (container "c" must not set securityContext.privileged=true)')
RESTRICTED_FAILS = ('host namespaces (hostNetwork=true, hostPID=true), '
                    'privileged (container "c" must not set securityContext.privileged=true), '
                    'allowPrivilegeEscalation != false (container "c" must set '
                    'securityContext.allowPrivilegeEscalation=false), '
                    'unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), '
                    'restricted volume types (volume "host" uses restricted volume type "hostPath"), '
                    'runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), '
                    'runAsUser=0 (container "c" must not set runAsUser=0), '
                    'seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to '
                    '"RuntimeDefault" or "Localhost")')
# what `kubectl create deployment web --image=busybox` lacks for restricted
RESTRICTED_PLAIN = ('allowPrivilegeEscalation != false (container "busybox" must set '
                    'securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "busybox" '
                    'must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container '
                    '"busybox" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "busybox" '
                    'must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")')


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    """`kite up` (its default: baseline) with the audit log; no agent: admission is the apiserver's."""
    wd = tmp_path_factory.mktemp("psa-up")
    c = Cluster("up", wd, extra_args=["--no-agent", "--audit-log-path", str(wd / "audit.log")]).start()
    c.audit_log = wd / "audit.log"
    yield c
    c.stop()


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory):
    """`kite apiserver`: upstream's default, privileged."""
    c = Cluster("apiserver", tmp_path_factory.mktemp("psa-apiserver")).start()
    yield c
    c.stop()


def namespace(c, name, **labels):
    body = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {f"pod-security.kubernetes.io/{k.replace('_', '-')}": v
                                                  for k, v in labels.items()}}}
    c.api().ok("POST", "/api/v1/namespaces", body)


def create_pod(c, ns, pod=ESCALATE):
    """Creates the pod with python3-kubernetes: (status, message)."""
    from kubernetes.client.rest import ApiException
    try:
        c.python_client().create_namespaced_pod(ns, pod)
        return 201, None
    except ApiException as e:
        return e.status, json.loads(e.body)["message"]


def test_kite_up_default_refuses_the_escalation_pod(up):
    p = up.kubectl("create", "-f", "-", "-n", "default", input=yaml.safe_dump(ESCALATE), check=False)
    assert p.returncode == 1
    assert p.stderr.strip() == ('Error from server (Forbidden): error when creating "STDIN": pods "escalate" is '
                                'forbidden: violates PodSecurity "baseline:latest": ' + BASELINE_FAILS)
    status, msg = create_pod(up, "default")
    assert (status, msg) == (403, 'pods "escalate" is forbidden: violates PodSecurity "baseline:latest": '
                             + BASELINE_FAILS)
    r = up.api().get("/api/v1/namespaces/default/pods/escalate")
    assert r.status == 404, "nothing was stored"
    # the audit event of the refusal says which policy refused it
    def refused_event():
        for line in up.audit_log.read_text().splitlines():
            e = json.loads(line)
            if (e["verb"] == "create" and e.get("objectRef", {}).get("resource") == "pods"
                    and e["responseStatus"]["code"] == 403):
                return e
    e = wait_for(refused_event, 5, what="the refused create in the audit log")
    assert e["annotations"]["pod-security.kubernetes.io/enforce-policy"] == "baseline:latest"
    assert e["annotations"]["pod-security.kubernetes.io/audit-violations"] == (
        'would violate PodSecurity "baseline:latest": ' + BASELINE_FAILS)


def test_a_plain_pod_passes_baseline(up):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
           "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": {"runAsUser": 0}}]}}
    p = up.kubectl("create", "-f", "-", "-n", "default", input=yaml.safe_dump(pod))
    assert p.stderr == "", "no warning at baseline"


def test_enforce_labels_refuse_at_their_level(apiserver):
    assert create_pod(apiserver, "default")[0] == 201, "kite apiserver's default is privileged"
    namespace(apiserver, "team-b", enforce="baseline")
    namespace(apiserver, "team-r", enforce="restricted")
    namespace(apiserver, "team-v", enforce="baseline", enforce_version="v1.30")
    assert create_pod(apiserver, "team-b") == (
        403, 'pods "escalate" is forbidden: violates PodSecurity "baseline:latest": ' + BASELINE_FAILS)
    assert create_pod(apiserver, "team-r") == (
        403, 'pods "escalate" is forbidden: violates PodSecurity "restricted:latest": ' + RESTRICTED_FAILS)
    assert create_pod(apiserver, "team-v") == (
        403, 'pods "escalate" is forbidden: violates PodSecurity "baseline:v1.30": ' + BASELINE_FAILS)
    p = apiserver.kubectl("create", "-f", "-", "-n", "team-r", input=yaml.safe_dump(ESCALATE), check=False)
    assert p.returncode == 1
    assert p.stderr.strip() == ('Error from server (Forbidden): error when creating "STDIN": pods "escalate" is '
                                'forbidden: violates PodSecurity "restricted:latest": ' + RESTRICTED_FAILS)


def test_privileged_namespace_admits_it(up):
    namespace(up, "infra", enforce="privileged", warn="privileged", audit="privileged")
    p = up.kubectl("create", "-f", "-", "-n", "infra", input=yaml.safe_dump(ESCALATE))
    assert p.stdout.strip() == "pod/escalate created" and p.stderr == ""
    # labelled by kubectl, as a user would: enforce alone, warn still follows the default
    up.kubectl("create", "namespace", "infra2")
    up.kubectl("label", "namespace", "infra2", "pod-security.kubernetes.io/enforce=privileged")
    p = up.kubectl("create", "-f", "-", "-n", "infra2", input=yaml.safe_dump(ESCALATE))
    assert p.stdout.strip() == "pod/escalate created"
    assert p.stderr.strip() == 'Warning: would violate PodSecurity "baseline:latest": ' + BASELINE_FAILS


def test_workload_templates_warn_and_are_not_enforced(up):
    # a violating template under kite up's default: created, with upstream's warning
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "root"},
           "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "root"}},
                    "template": {"metadata": {"labels": {"app": "root"}}, "spec": ESCALATE["spec"]}}}
    p = up.kubectl("create", "-f", "-", "-n", "default", input=yaml.safe_dump(dep))
    assert p.stdout.strip() == "deployment.apps/root created"
    assert p.stderr.strip() == 'Warning: would violate PodSecurity "baseline:latest": ' + BASELINE_FAILS
    # kubectl create deployment in a namespace that warns at restricted
    namespace(up, "strict-warn", warn="restricted")
    p = up.kubectl("create", "deployment", "web", "--image=busybox", "-n", "strict-warn")
    assert p.stdout.strip() == "deployment.apps/web created"
    assert p.stderr.strip() == 'Warning: would violate PodSecurity "restricted:latest": ' + RESTRICTED_PLAIN
    # and the other kinds with a pod template
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"suspend": True, "template": {"spec": {**ESCALATE["spec"], "restartPolicy": "Never"}}}}
    p = up.kubectl("create", "-f", "-", "-n", "default", input=yaml.safe_dump(job))
    assert p.stderr.strip() == 'Warning: would violate PodSecurity "baseline:latest": ' + BASELINE_FAILS


def test_pod_updates_are_checked_only_when_the_spec_changes(apiserver):
    namespace(apiserver, "later")
    assert create_pod(apiserver, "later")[0] == 201
    # raising the namespace's level is admitted, with warnings naming the pods that violate it
    p = apiserver.kubectl("label", "namespace", "later", "pod-security.kubernetes.io/enforce=baseline")
    assert p.stdout.strip() == "namespace/later labeled"
    assert p.stderr.splitlines() == [
        'Warning: existing pods in namespace "later" violate the new PodSecurity enforce level "baseline:latest"',
        'Warning: escalate: host namespaces, hostPath volumes, privileged']
    # a label change is no significant update: admitted
    apiserver.kubectl("label", "pod", "escalate", "-n", "later", "touched=yes")
    # status writes are not checked
    api = apiserver.api()
    r = api.patch("/api/v1/namespaces/later/pods/escalate/status", json.dumps({"status": {"message": "x"}}).encode(),
                  ctype="application/merge-patch+json")
    assert r.status == 200, r.body
    # a new image is
    p = apiserver.kubectl("set", "image", "pod/escalate", "c=busybox:2", "-n", "later", check=False)
    assert p.returncode == 1
    assert ('pods "escalate" is forbidden: violates PodSecurity "baseline:latest": ' + BASELINE_FAILS) in p.stderr


def test_invalid_labels_are_refused(apiserver):
    p = apiserver.kubectl("create", "-f", "-", check=False, input=yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": "bad", "labels": {"pod-security.kubernetes.io/enforce": "strict",
                                                "pod-security.kubernetes.io/warn-version": "1.30"}}}))
    assert p.returncode == 1
    assert p.stderr.strip() == (
        'The Namespace "bad" is invalid: \n'
        '* metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: "strict": must be one of privileged, '
        'baseline, restricted\n'
        '* metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: "1.30": must be "latest" or "v1.x"')
    apiserver.kubectl("create", "namespace", "ok")
    p = apiserver.kubectl("label", "namespace", "ok", "pod-security.kubernetes.io/audit=everything", check=False)
    assert p.returncode == 1
    assert p.stderr.strip() == (
        'The Namespace "ok" is invalid: metadata.labels[pod-security.kubernetes.io/audit]: Invalid value: '
        '"everything": must be one of privileged, baseline, restricted')


def test_default_flag_and_exemptions(tmp_path):
    c = Cluster("apiserver", tmp_path, extra_args=[
        "--pod-security-default", "restricted:v1.31", "--pod-security-exempt-namespaces", "ops",
        "--pod-security-exempt-usernames", "ci-bot"]).start()
    try:
        assert create_pod(c, "default") == (
            403, 'pods "escalate" is forbidden: violates PodSecurity "restricted:v1.31": ' + RESTRICTED_FAILS)
        namespace(c, "ops")
        assert create_pod(c, "ops")[0] == 201, "an exempt namespace"
        # an exempt user, by impersonation
        namespace(c, "ci")
        r = c.api().post("/api/v1/namespaces/ci/pods", json.dumps(ESCALATE).encode(), ctype="application/json",
                         headers={"Impersonate-User": "ci-bot", "Impersonate-Group": "system:masters"})
        assert r.status == 201, r.body
        # a namespace's label overrides the default
        namespace(c, "free", enforce="privileged", warn="privileged", audit="privileged")
        assert create_pod(c, "free")[0] == 201
    finally:
        c.stop()
    bad = KiteProcess(["apiserver", "--data-dir", str(tmp_path / "bad"), "--listen", "127.0.0.1:0",
                       "--pod-security-default", "strict"], tmp_path, "bad").start()
    wait_for(lambda: not bad.alive(), 10, what="kite apiserver refusing the flag")
    assert bad.proc.returncode == 1
    assert ('--pod-security-default: "strict": must be privileged, baseline or restricted, optionally followed by '
            ':latest or :v1.N') in bad.log_tail()


def test_raising_enforce_names_the_violating_pods(apiserver):
    namespace(apiserver, "crowd")
    host_pid = {"hostPID": True, "containers": [{"name": "c", "image": "busybox"}]}
    for name in ["web-b", "web-a", "web-c"]:
        assert create_pod(apiserver, "crowd", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                               "spec": host_pid})[0] == 201
    assert create_pod(apiserver, "crowd", {**ESCALATE, "metadata": {"name": "root"}})[0] == 201
    assert create_pod(apiserver, "crowd", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fine"},
                                           "spec": {"containers": [{"name": "c", "image": "busybox"}]}})[0] == 201
    p = apiserver.kubectl("label", "namespace", "crowd", "pod-security.kubernetes.io/enforce=baseline")
    assert p.stderr.splitlines() == [
        'Warning: existing pods in namespace "crowd" violate the new PodSecurity enforce level "baseline:latest"',
        'Warning: root: host namespaces, hostPath volumes, privileged',
        'Warning: web-a (and 2 other pods): host namespaces']
    # lowering it, or keeping it, checks nothing
    p = apiserver.kubectl("label", "--overwrite", "namespace", "crowd", "pod-security.kubernetes.io/enforce=privileged")
    assert p.stderr == ""


def test_a_long_warning_is_cut_as_kube_apiserver_cuts_it(up):
    """Past 4 KiB of warning text an answer's warnings are cut to 256 bytes each."""
    names = [f"container-number-{i:03d}" for i in range(300)]
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "wide"},
           "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "wide"}},
                    "template": {"metadata": {"labels": {"app": "wide"}},
                                 "spec": {"containers": [{"name": n, "image": "busybox",
                                                          "securityContext": {"privileged": True}} for n in names]}}}}
    p = up.kubectl("create", "-f", "-", "-n", "default", input=yaml.safe_dump(dep))
    assert p.stdout.strip() == "deployment.apps/wide created"
    full = ('would violate PodSecurity "baseline:latest": privileged (containers '
            + ", ".join(f'"{n}"' for n in names) + " must not set securityContext.privileged=true)")
    assert len(full) > 4096
    assert p.stderr.strip() == "Warning: " + full[:256]
