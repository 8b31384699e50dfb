"""batch/v1 CronJob under `kite up`: defaults and validation as kube-apiserver's (the schedule as
robfig/cron reads it, the time zone), kubectl get cj's columns and get all, kubectl create job
--from=cronjob/..., and (slow: it waits for the minute) a `*/1 * * * *` CronJob that runs a Job
within 70 s, records lastScheduleTime and lastSuccessfulTime, and keeps no more finished Jobs
than its history limit. Needs root, runc, conmon, umoci."""
import os
import shutil
import subprocess

import pytest

from conftest import AGENT_FAST_FLAGS, KITE, REPO, Cluster, _workdir, delete_pods_now, wait_for

NS = "default"
BATCH = f"/apis/batch/v1/namespaces/{NS}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if os.geteuid() != 0 or not all(shutil.which(b) for b in ("runc", "conmon", "umoci")):
        pytest.skip("needs root, runc, conmon and umoci (scripts/install-deps)")
    work = _workdir(tmp_path_factory, "cj")
    tar = os.path.join(os.path.dirname(KITE), "busybox.tar")
    if not os.path.exists(tar):
        tar = str(work / "busybox.tar")
        subprocess.run([str(REPO / "scripts/make-busybox-image"), tar], check=True, capture_output=True)
    c = Cluster("up", work, extra_args=AGENT_FAST_FLAGS)
    r = subprocess.run([KITE, "images", "import", tar, "--root-dir", str(c.data_dir / "agent")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    c.start()
    yield c
    c.kubectl("delete", "cronjob", "--all", check=False)
    c.kubectl("delete", "job", "--all", check=False)
    delete_pods_now(c)
    c.stop()


def cronjob(name, schedule="*/1 * * * *", command="echo hi", **spec):
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, **spec, "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", command]}]}}}}}}


def test_defaults_validation_and_columns(cluster):
    api = cluster.api()
    made = api.ok("POST", f"{BATCH}/cronjobs", cronjob("nightly", "@daily", timeZone="Europe/Paris", suspend=True))
    s = made["spec"]
    assert (s["concurrencyPolicy"], s["suspend"], s["successfulJobsHistoryLimit"], s["failedJobsHistoryLimit"]) == \
        ("Allow", True, 3, 1), s
    out = cluster.kubectl("get", "cj", "nightly").stdout.splitlines()
    assert out[0].split() == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"], out
    assert out[1].split()[:6] == ["nightly", "@daily", "Europe/Paris", "True", "0", "<none>"], out
    assert "cronjob.batch/nightly" in cluster.kubectl("get", "all").stdout
    for body, want in [
        (cronjob("bad1", "61 * * * *"), 'spec.schedule: Invalid value: "61 * * * *": end of range above maximum: 61'),
        (cronjob("bad2", "* * * *"), 'spec.schedule: Invalid value: "* * * *": expected exactly 5 fields, found 4'),
        (cronjob("bad3", timeZone="Mars/Base"), 'spec.timeZone: Invalid value: "Mars/Base": unknown time zone Mars/Base'),
        (cronjob("bad4", concurrencyPolicy="Sometimes"), 'spec.concurrencyPolicy: Unsupported value: "Sometimes"'),
        (cronjob("x" * 53), "must be no more than 52 characters"),
    ]:
        r = api.post(f"{BATCH}/cronjobs", body)
        assert r.status == 422, (body, r.body)
        assert want in r.json()["message"], r.json()["message"]
    bad = cronjob("bad5")
    bad["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    r = api.post(f"{BATCH}/cronjobs", bad)
    assert r.status == 422 and "spec.jobTemplate.spec.template.spec.restartPolicy: Unsupported value: \"Always\"" \
        in r.json()["message"]


def test_create_job_from_cronjob(cluster):
    c = cluster
    c.kubectl("create", "job", "by-hand", "--from=cronjob/nightly")
    job = c.api().get(f"{BATCH}/jobs/by-hand").json()
    assert job["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] == "manual", job["metadata"]
    assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
    wait_for(lambda: (c.api().get(f"{BATCH}/jobs/by-hand").json().get("status") or {}).get("succeeded") == 1, 60,
             what="the job done")


@pytest.mark.slow
def test_every_minute_runs_a_job_and_keeps_its_history_limit(cluster):
    c = cluster
    # the Job runs 8 s: with a history limit of 0 a Job done at once was deleted between two polls of a
    # loaded machine, and the test saw no Job at all
    c.api().ok("POST", f"{BATCH}/cronjobs", cronjob("tick", command="sleep 8; echo hi", successfulJobsHistoryLimit=0))

    def jobs():
        return [j for j in c.api().get(f"{BATCH}/jobs").json()["items"]
                if j["metadata"].get("ownerReferences", [{}])[0].get("name") == "tick"]
    # a Job for the next whole minute, named after it, within 70 s
    made = wait_for(lambda: jobs(), 70, interval=0.5, what="a Job from the CronJob")[0]
    name = made["metadata"]["name"]
    assert name.startswith("tick-") and made["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"]
    st = wait_for(lambda: (s := c.api().get(f"{BATCH}/cronjobs/tick").json().get("status") or {})
                  .get("lastSuccessfulTime") and s, 60, what="lastSuccessfulTime")
    assert st["lastScheduleTime"], st
    # successfulJobsHistoryLimit 0: the finished Job is deleted
    wait_for(lambda: name not in [j["metadata"]["name"] for j in jobs()], 30, what="the finished Job deleted")
    c.kubectl("delete", "cronjob", "tick")
