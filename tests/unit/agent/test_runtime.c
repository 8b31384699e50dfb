/* The runtime interface contract, on the fake runtime. */
#include <criterion/criterion.h>
#include <poll.h>
#include <stdio.h>

#include "agent/runtime/runtime.h"
#include "base/base.h"
#include "base/clock.h"
#include "test_nodestatus_util.h"

TestSuite(runtime, .fini = nst_cleanup);


Test(runtime, fake_version_images_and_errors) {
    struct kite_runtime *rt = kite_runtime_fake_new("1.2.3");
    cr_assert_str_eq(rt->ops->name, "fake");
    char *name = NULL, *version = NULL;
    cr_assert_eq(rt->ops->version(rt, &name, &version), 0);
    cr_assert_str_eq(name, "fake");
    cr_assert_str_eq(version, "1.2.3");
    free(name);
    free(version);

    struct kite_image *v = (void *)1;
    size_t n = 99;
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_null(v);

    /* the fake copies what it is given: the caller's arrays may go away */
    char *names[] = {kite_strdup("a:1"), kite_strdup("a@sha256:00")};
    struct kite_image in[] = {{names, 2, 42, NULL, NULL}};
    kite_runtime_fake_set_images(rt, in, 1);
    free(names[0]);
    free(names[1]);
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(v[0].n_names, 2);
    cr_assert_str_eq(v[0].names[0], "a:1");
    cr_assert_str_eq(v[0].names[1], "a@sha256:00");
    cr_assert_eq(v[0].size_bytes, 42);
    kite_images_free(v, n);

    kite_runtime_fake_set_error(rt, -EIO);
    cr_assert_eq(rt->ops->version(rt, &name, &version), -EIO);
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), -EIO);
    kite_runtime_fake_set_error(rt, 0);
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), 0);
    kite_images_free(v, n);
    kite_runtime_free(rt);
    kite_runtime_free(NULL);

    rt = kite_runtime_fake_new(NULL);
    cr_assert_eq(rt->ops->version(rt, &name, &version), 0);
    cr_assert_str_eq(version, "0.0.0");
    free(name);
    free(version);
    kite_runtime_free(rt);
}

static char *run_pod(struct kite_runtime *rt) {
    struct kite_sandbox_config sc = {.uid = "u1", .name = "p", .ns = "default"};
    char *sid = NULL;
    cr_assert_eq(rt->ops->run_sandbox(rt, &sc, 0, &sid, NULL), 0);
    return sid;
}

static struct kite_runtime *fake_with_busybox(void) {
    struct kite_runtime *rt = kite_runtime_fake_new("1.0");
    char *names[] = {"docker.io/library/busybox:latest"};
    struct kite_image img = {names, 1, 1000, "sha256:ab", NULL};
    kite_runtime_fake_set_images(rt, &img, 1);
    return rt;
}

Test(runtime, fake_sandbox_container_lifecycle_and_events) {
    struct kite_runtime *rt = fake_with_busybox();
    char *sid = run_pod(rt), *cid = NULL, *err = NULL;
    struct kite_sandbox_status ss;
    cr_assert_eq(rt->ops->sandbox_status(rt, sid, 0, &ss), 0);
    cr_assert_eq(ss.state, KITE_SANDBOX_READY);
    cr_assert_str_eq(ss.ip, "10.88.0.2", "the first sandbox's address");
    kite_sandbox_status_release(&ss);

    struct kite_fake_script sc = {.exit_after_ns = 20 * KITE_NS_PER_MS, .exit_code = 3};
    kite_runtime_fake_script(rt, "job", &sc);
    struct kite_container_config cc = {.name = "job", .image = "busybox"};
    cr_assert_eq(rt->ops->create_container(rt, "nope", &cc, 0, &cid, NULL), -ENOENT);
    struct kite_container_config bad = {.name = "job", .image = "nginx"};
    cr_assert_eq(rt->ops->create_container(rt, sid, &bad, 0, &cid, &err), -ENOENT);
    cr_assert(strstr(err, "nginx"));
    free(err);
    cr_assert_eq(rt->ops->create_container(rt, sid, &cc, 0, &cid, NULL), 0);
    struct kite_container_status st;
    cr_assert_eq(rt->ops->container_status(rt, cid, 0, &st), 0);
    cr_assert_eq(st.state, KITE_CONTAINER_CREATED);
    cr_assert_str_eq(st.image_id, "sha256:ab");
    kite_container_status_release(&st);
    cr_assert_eq(rt->ops->start_container(rt, cid, 0, NULL), 0);
    cr_assert_eq(rt->ops->container_status(rt, cid, 0, &st), 0);
    cr_assert_eq(st.state, KITE_CONTAINER_RUNNING);
    kite_container_status_release(&st);

    /* the events fd polls readable at the scripted exit */
    struct pollfd p = {.fd = rt->ops->events_fd(rt), .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 2000), 1);
    struct kite_container_event *ev = NULL;
    size_t n = 0;
    cr_assert_eq(rt->ops->read_events(rt, &ev, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(ev[0].container_id, cid);
    cr_assert_eq(ev[0].exit_code, 3);
    kite_container_events_free(ev, n);
    cr_assert_eq(rt->ops->read_events(rt, &ev, &n), 0);
    cr_assert_eq(n, 0, "an exit is reported once");
    cr_assert_eq(rt->ops->container_status(rt, cid, 0, &st), 0);
    cr_assert_eq(st.state, KITE_CONTAINER_EXITED);
    cr_assert_eq(st.exit_code, 3);
    cr_assert_str_eq(st.reason, "Error");
    kite_container_status_release(&st);
    struct kite_exec_result er;
    const char *argv[] = {"true"};
    cr_assert_eq(rt->ops->exec_sync(rt, cid, argv, 1, 0, &er), -ENOTCONN);

    struct kite_container_status *v = NULL;
    cr_assert_eq(rt->ops->list_containers(rt, sid, 0, &v, &n), 0);
    cr_assert_eq(n, 1);
    kite_container_statuses_free(v, n);
    cr_assert_eq(rt->ops->remove_sandbox(rt, sid, 0), 0);
    cr_assert_eq(rt->ops->container_status(rt, cid, 0, &st), -ENOENT);
    cr_assert_eq(rt->ops->sandbox_status(rt, sid, 0, &ss), -ENOENT);
    free(cid);
    free(sid);
    kite_runtime_free(rt);
}

Test(runtime, fake_oom_stop_grace_exec_and_hang) {
    struct kite_runtime *rt = fake_with_busybox();
    char *sid = run_pod(rt), *a = NULL, *b = NULL, *c = NULL;
    struct kite_fake_script oom = {.exit_after_ns = 0, .oom = true};
    struct kite_fake_script stubborn = {.exit_after_ns = -1, .ignore_sigterm = true, .exec_output = "hi\n", .exec_exit_code = 7};
    kite_runtime_fake_script(rt, "oom", &oom);
    kite_runtime_fake_script(rt, "stubborn", &stubborn);
    struct kite_container_config ca = {.name = "oom", .image = "busybox"}, cb = {.name = "stubborn", .image = "busybox"};
    cr_assert_eq(rt->ops->create_container(rt, sid, &ca, 0, &a, NULL), 0);
    cr_assert_eq(rt->ops->create_container(rt, sid, &cb, 0, &b, NULL), 0);
    cr_assert_eq(rt->ops->start_container(rt, a, 0, NULL), 0);
    cr_assert_eq(rt->ops->start_container(rt, b, 0, NULL), 0);
    struct kite_container_status st;
    cr_assert_eq(rt->ops->container_status(rt, a, 0, &st), 0);
    cr_assert_eq(st.state, KITE_CONTAINER_EXITED);
    cr_assert(st.oom_killed);
    cr_assert_eq(st.exit_code, 137);
    cr_assert_str_eq(st.reason, "OOMKilled");
    kite_container_status_release(&st);

    struct kite_exec_result er;
    const char *argv[] = {"echo", "hi"};
    cr_assert_eq(rt->ops->exec_sync(rt, b, argv, 2, 0, &er), 0);
    cr_assert_str_eq(er.output, "hi\n");
    cr_assert_eq(er.exit_code, 7);
    free(er.output);

    /* SIGTERM ignored: the stop takes the grace period, then the kill (137) */
    int64_t t0 = kite_now_mono(kite_clock_real());
    cr_assert_eq(rt->ops->stop_container(rt, b, 50 * KITE_NS_PER_MS, 0), 0);
    cr_assert_geq(kite_now_mono(kite_clock_real()) - t0, 50 * KITE_NS_PER_MS);
    cr_assert_eq(rt->ops->container_status(rt, b, 0, &st), 0);
    cr_assert_eq(st.exit_code, 137);
    cr_assert_eq(st.signal, 9);
    kite_container_status_release(&st);

    /* a hung call returns -ETIMEDOUT at its deadline */
    struct kite_container_config cc = {.name = "x", .image = "busybox"};
    cr_assert_eq(rt->ops->create_container(rt, sid, &cc, 0, &c, NULL), 0);
    kite_runtime_fake_hang(rt, "start_container");
    t0 = kite_now_mono(kite_clock_real());
    cr_assert_eq(rt->ops->start_container(rt, c, 30 * KITE_NS_PER_MS, NULL), -ETIMEDOUT);
    cr_assert_geq(kite_now_mono(kite_clock_real()) - t0, 30 * KITE_NS_PER_MS);
    kite_runtime_fake_hang(rt, NULL);
    cr_assert_eq(rt->ops->start_container(rt, c, 0, NULL), 0);
    cr_assert_eq(rt->ops->stop_sandbox(rt, sid, 0), 0);
    cr_assert_eq(rt->ops->container_status(rt, c, 0, &st), 0);
    cr_assert_eq(st.state, KITE_CONTAINER_EXITED);
    kite_container_status_release(&st);
    free(a);
    free(b);
    free(c);
    free(sid);
    kite_runtime_free(rt);
}
