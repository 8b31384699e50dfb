/* The runc runtime against the real runc and conmon, with the busybox image the repo's script
 * builds. Skipped (with the reason) where runc cannot run containers: not root, or runc,
 * conmon, umoci or busybox-static missing. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/runtime/runc-int.h"
#include "agent/runtime/runtime.h"
#include "base/base.h"
#include "base/clock.h"
#include "test_nodestatus_util.h"


static char *root, *tarball;
/* a bridge and range of this test's own, beside a `make up` node's kite0 and 10.88.0.0/16 */
static char bridge[16], cidr[32];

static void drop_bridge(void) {
    if (!bridge[0]) return;
    _cleanup_free_ char *cmd = kite_asprintf("ip link del %s 2>/dev/null", bridge);
    if (system(cmd) != 0) { /* absent: nothing ran in a pod network */
    }
}

static void fini(void) {
    drop_bridge();
    nst_cleanup();
}

TestSuite(runtime_runc, .fini = fini, .timeout = 60);

/* Whether an address of the host is in 10.a.b.0/24: another bridge (a killed run's) holds it,
 * and the range's routes would go there. */
static bool range_taken(int a, int b) {
    struct ifaddrs *ifs = NULL;
    bool taken = false;
    if (getifaddrs(&ifs) < 0) return false;
    for (struct ifaddrs *i = ifs; i && !taken; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
        uint32_t ip = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
        taken = ip >> 8 == (10u << 16 | (uint32_t)a << 8 | (uint32_t)b);
    }
    freeifaddrs(ifs);
    return taken;
}

static struct kite_runc_options opts(const char *dir) {
    snprintf(bridge, sizeof bridge, "ktu%d", (int)(getpid() % 1000000));
    int a = 150 + (int)(getpid() % 50), b = (int)(getpid() % 250);
    for (int k = 0; k < 250 && range_taken(a, b); k++) b = (b + 1) % 250;
    snprintf(cidr, sizeof cidr, "10.%d.%d.0/24", a, b);
    return (struct kite_runc_options){.root_dir = dir, .bridge = bridge, .pod_cidr = cidr};
}

static struct kite_runtime *setup(void) {
    if (geteuid() != 0) cr_skip_test("runc runtime tests need root");
    if (access("/usr/sbin/runc", X_OK) || access("/usr/bin/conmon", X_OK) || access("/bin/busybox", X_OK))
        cr_skip_test("runc, conmon or busybox-static missing (scripts/install-deps)");
    root = nst_tmpdir();
    tarball = kite_asprintf("%s/busybox.tar", root);
    _cleanup_free_ char *cmd = kite_asprintf("scripts/make-busybox-image %s >/dev/null 2>&1", tarball);
    if (system(cmd) != 0) cr_skip_test("scripts/make-busybox-image failed (umoci missing?)");
    struct kite_runtime *rt = NULL;
    char *err = NULL;
    struct kite_runc_options o = opts(root);
    cr_assert_eq(kite_runtime_runc_new(&o, &rt, &err), 0, "%s", err ? err : "");
    cr_assert_eq(rt->ops->import_image(rt, tarball, NULL, NULL, &err), 0, "%s", err ? err : "");
    return rt;
}

static int64_t mono(void) { return kite_now_mono(kite_clock_real()); }

static char *start(struct kite_runtime *rt, const char *sid, const char *name, const char *script, int64_t mem,
                   int64_t *ret_latency) {
    const char *cmd[] = {"sh", "-c", script};
    struct kite_container_config cc = {.name = name, .image = "busybox", .command = cmd, .n_command = 3,
                                       .memory_limit_bytes = mem};
    char *id = NULL, *err = NULL;
    int64_t t0 = mono();
    cr_assert_eq(rt->ops->create_container(rt, sid, &cc, 0, &id, &err), 0, "%s", err ? err : "");
    cr_assert_eq(rt->ops->start_container(rt, id, 0, &err), 0, "%s", err ? err : "");
    if (ret_latency) *ret_latency = mono() - t0;
    return id;
}

/* Waits for the container's exit event; returns its exit code. */
static int wait_event(struct kite_runtime *rt, const char *id, bool *oom, int64_t *ret_seen) {
    for (int i = 0; i < 200; i++) {
        struct pollfd p = {.fd = rt->ops->events_fd(rt), .events = POLLIN};
        poll(&p, 1, 100);
        struct kite_container_event *ev = NULL;
        size_t n = 0;
        cr_assert_eq(rt->ops->read_events(rt, &ev, &n), 0);
        for (size_t j = 0; j < n; j++)
            if (strcmp(ev[j].container_id, id) == 0) {
                int code = ev[j].exit_code;
                if (oom) *oom = ev[j].oom_killed;
                if (ret_seen) *ret_seen = kite_now_wall(kite_clock_real()) - ev[j].finished_ns;
                kite_container_events_free(ev, n);
                return code;
            }
        kite_container_events_free(ev, n);
    }
    cr_assert_fail("no exit event for %s", id);
    return -1;
}

Test(runtime_runc, pod_exit_code_log_exec_stop_oom_and_recovery) {
    struct kite_runtime *rt = setup();
    char *name = NULL, *version = NULL;
    cr_assert_eq(rt->ops->version(rt, &name, &version), 0);
    cr_assert_str_eq(name, "runc");
    cr_assert(strchr(version, '.'));
    free(name);
    free(version);
    struct kite_image *imgs = NULL;
    size_t n = 0;
    cr_assert_eq(rt->ops->list_images(rt, &imgs, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(imgs[0].names[0], "docker.io/library/busybox:latest");
    cr_assert_gt(imgs[0].size_bytes, 100000);
    kite_images_free(imgs, n);

    struct kite_sandbox_config sc = {.uid = "0123-uid", .name = "pod1", .ns = "default"};
    char *sid = NULL, *err = NULL;
    int64_t t0 = mono();
    cr_assert_eq(rt->ops->run_sandbox(rt, &sc, 0, &sid, &err), 0, "%s", err ? err : "");
    int64_t sandbox_ns = mono() - t0;
    struct kite_sandbox_status ss;
    cr_assert_eq(rt->ops->sandbox_status(rt, sid, 0, &ss), 0);
    cr_assert_eq(ss.state, KITE_SANDBOX_READY);
    /* the pod network: the range's first pod address, on a veth plugged into the bridge */
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%.*s", (int)(strrchr(cidr, '.') - cidr), cidr);
    _cleanup_free_ char *pod_ip = kite_asprintf("%s.2", prefix), *gw = kite_asprintf("%s.1", prefix);
    cr_assert_str_eq(ss.ip, pod_ip);
    kite_sandbox_status_release(&ss);
    _cleanup_free_ char *veth = kite_asprintf("/sys/class/net/kv%.12s/master/bridge", sid),
                        *held = kite_asprintf("%s/ipam/%s", root, pod_ip);
    cr_assert_eq(access(veth, F_OK), 0, "%s", veth);
    cr_assert_eq(access(held, F_OK), 0, "%s", held);
    /* a hostNetwork sandbox takes no address */
    struct kite_sandbox_config hc = {.uid = "0456-uid", .name = "hostpod", .ns = "default", .host_network = true};
    char *hid = NULL;
    cr_assert_eq(rt->ops->run_sandbox(rt, &hc, 0, &hid, &err), 0, "%s", err ? err : "");
    cr_assert_eq(rt->ops->sandbox_status(rt, hid, 0, &ss), 0);
    cr_assert_str_eq(ss.ip, "");
    kite_sandbox_status_release(&ss);
    cr_assert_eq(rt->ops->remove_sandbox(rt, hid, 0), 0);
    free(hid);

    /* exit code and CRI log */
    int64_t lat = 0, seen = 0;
    char *a = start(rt, sid, "echo", "echo hello; hostname; exit 3", 0, &lat);
    cr_assert_eq(wait_event(rt, a, NULL, &seen), 3);
    fprintf(stderr, "runc: sandbox %lld ms, create+start %lld ms, exit seen %lld us after the exit\n",
            (long long)(sandbox_ns / KITE_NS_PER_MS), (long long)(lat / KITE_NS_PER_MS), (long long)(seen / 1000));
    struct kite_container_status st;
    cr_assert_eq(rt->ops->container_status(rt, a, 0, &st), 0);
    cr_assert_eq(st.state, KITE_CONTAINER_EXITED);
    cr_assert_eq(st.exit_code, 3);
    cr_assert_str_eq(st.reason, "Error");
    cr_assert_geq(st.finished_ns, st.started_ns);
    _cleanup_free_ char *log = NULL;
    size_t len = 0;
    cr_assert_eq(kite_read_file(st.log_path, 65536, &log, &len), 0, "%s", st.log_path);
    cr_assert(strstr(st.log_path, "/logs/default_pod1_0123-uid/echo/0.log"), "%s", st.log_path);
    cr_assert(strstr(log, " stdout F hello\n"), "%s", log);
    cr_assert(strstr(log, " stdout F pod1\n"), "the pod's hostname: %s", log);
    cr_assert(log[4] == '-' && log[10] == 'T', "RFC 3339 time first: %s", log);
    kite_container_status_release(&st);

    /* inside: eth0 with the address, lo up, the default route via the bridge; the host answers */
    /* (one echo at a time, up to 5 of them: the first may go before the fresh veth forwards) */
    _cleanup_free_ char *script =
        kite_asprintf("ip -4 addr show eth0; ip -4 addr show lo; ip route; for i in 1 2 3 4 5; do "
                      "ping -c 1 -W 2 %s >/dev/null && echo gateway answers && exit 0; echo \"echo $i lost\"; done; exit 1",
                      gw);
    char *nc = start(rt, sid, "net", script, 0, NULL);
    int net_exit = wait_event(rt, nc, NULL, NULL);
    cr_assert_eq(rt->ops->container_status(rt, nc, 0, &st), 0);
    _cleanup_free_ char *netlog = NULL, *inet = kite_asprintf("inet %s/24", pod_ip),
                        *route = kite_asprintf("default via %s dev eth0", gw);
    cr_assert_eq(kite_read_file(st.log_path, 65536, &netlog, &len), 0);
    cr_assert_eq(net_exit, 0, "%s", netlog);
    cr_assert(strstr(netlog, inet) && strstr(netlog, "inet 127.0.0.1/8") && strstr(netlog, route), "%s", netlog);
    cr_assert(strstr(netlog, "gateway answers"), "%s", netlog);
    kite_container_status_release(&st);
    free(nc);

    /* exec, then stop with a grace period that SIGTERM-trapping container ignores */
    char *b = start(rt, sid, "trap", "trap 'echo got TERM' TERM; while true; do sleep 0.1; done", 0, NULL);
    struct kite_exec_result er;
    const char *argv[] = {"sh", "-c", "echo out; exit 5"};
    cr_assert_eq(rt->ops->exec_sync(rt, b, argv, 3, 0, &er), 0);
    cr_assert_eq(er.exit_code, 5);
    cr_assert_str_eq(er.output, "out\n");
    free(er.output);
    const char *slow[] = {"sleep", "5"};
    t0 = mono();
    cr_assert_eq(rt->ops->exec_sync(rt, b, slow, 2, 300 * KITE_NS_PER_MS, &er), -ETIMEDOUT);
    cr_assert_lt(mono() - t0, 2 * KITE_NS_PER_SEC);
    t0 = mono();
    cr_assert_eq(rt->ops->stop_container(rt, b, 500 * KITE_NS_PER_MS, 0), 0);
    int64_t took = mono() - t0;
    cr_assert_geq(took, 500 * KITE_NS_PER_MS, "the grace period is waited");
    cr_assert_lt(took, 3 * KITE_NS_PER_SEC);
    cr_assert_eq(rt->ops->container_status(rt, b, 0, &st), 0);
    cr_assert_eq(st.exit_code, 137);
    cr_assert_eq(st.signal, 9);
    _cleanup_free_ char *blog = NULL;
    cr_assert_eq(kite_read_file(st.log_path, 65536, &blog, &len), 0);
    cr_assert(strstr(blog, "got TERM"), "SIGTERM came first: %s", blog);
    kite_container_status_release(&st);

    /* over a 16 MiB limit: OOM-killed */
    bool oom = false;
    char *c = start(rt, sid, "hog", "x=$(head -c 64m /dev/zero | tr '\\0' x); echo survived", 16 << 20, NULL);
    cr_assert_eq(wait_event(rt, c, &oom, NULL), 137);
    cr_assert(oom);
    cr_assert_eq(rt->ops->container_status(rt, c, 0, &st), 0);
    cr_assert(st.oom_killed);
    cr_assert_str_eq(st.reason, "OOMKilled");
    kite_container_status_release(&st);
    cr_assert_eq(rt->ops->remove_image(rt, "busybox"), -EBUSY);

    /* recovery: a second instance on the same root sees the running one and the ended one's code */
    char *d = start(rt, sid, "long", "sleep 1000", 0, NULL);
    char *e = start(rt, sid, "short", "sleep 0.3; exit 4", 0, NULL);
    kite_runtime_free(rt);
    usleep(600 * 1000); /* e ends while no runtime instance runs */
    /* an address held by a sandbox that never came to be (a crash in run_sandbox) */
    _cleanup_free_ char *stray = kite_asprintf("%s/ipam/%s.77", root, prefix);
    cr_assert_eq(kite_write_file_atomic(stray, "0123456789abcdef0123456789abcdef\n", 33, 0600, false), 0);
    struct kite_runc_options o = opts(root);
    cr_assert_eq(kite_runtime_runc_new(&o, &rt, &err), 0);
    cr_assert_eq(access(stray, F_OK), -1, "released at start");
    cr_assert_eq(access(held, F_OK), 0, "a running sandbox keeps its address");
    cr_assert_eq(rt->ops->container_status(rt, d, 0, &st), 0);
    cr_assert_eq(st.state, KITE_CONTAINER_RUNNING);
    cr_assert_gt(st.pid, 0);
    kite_container_status_release(&st);
    cr_assert_eq(rt->ops->container_status(rt, e, 0, &st), 0);
    cr_assert_eq(st.state, KITE_CONTAINER_EXITED);
    cr_assert_eq(st.exit_code, 4);
    kite_container_status_release(&st);
    cr_assert_eq(rt->ops->sandbox_status(rt, sid, 0, &ss), 0);
    cr_assert_str_eq(ss.ip, pod_ip, "the address is known again after a restart");
    kite_sandbox_status_release(&ss);
    struct kite_container_status *v = NULL;
    cr_assert_eq(rt->ops->list_containers(rt, sid, 0, &v, &n), 0);
    cr_assert_eq(n, 6);
    kite_container_statuses_free(v, n);
    /* the recovered instance still sees d's exit as an event */
    cr_assert_eq(rt->ops->stop_container(rt, d, 0, 0), 0);
    cr_assert_eq(wait_event(rt, d, NULL, NULL), 137);

    cr_assert_eq(rt->ops->remove_sandbox(rt, sid, 0), 0);
    cr_assert_eq(rt->ops->container_status(rt, a, 0, &st), -ENOENT);
    cr_assert_eq(access(veth, F_OK), -1, "the veth is gone");
    cr_assert_eq(access(held, F_OK), -1, "the address is free");
    cr_assert_eq(rt->ops->list_containers(rt, NULL, 0, &v, &n), 0);
    cr_assert_eq(n, 0);
    free(v);
    cr_assert_eq(rt->ops->remove_image(rt, "busybox"), 0);
    cr_assert_eq(rt->ops->image_status(rt, "busybox", &(struct kite_image){0}), -ENOENT);
    free(a), free(b), free(c), free(d), free(e), free(sid);
    kite_runtime_free(rt);
}

/* The CRI log of container id, once it exited with code 0 (the test fails otherwise). */
static char *exited_log(struct kite_runtime *rt, const char *id) {
    struct kite_container_status st;
    for (int i = 0; i < 200; i++) { /* by its status: wait_event drops the events of others */
        cr_assert_eq(rt->ops->container_status(rt, id, 0, &st), 0);
        if (st.state == KITE_CONTAINER_EXITED) break;
        kite_container_status_release(&st);
        usleep(100 * 1000);
    }
    cr_assert_eq(st.state, KITE_CONTAINER_EXITED, "%s did not exit", id);
    int code = st.exit_code;
    char *log = NULL;
    size_t len = 0;
    cr_assert_eq(kite_read_file(st.log_path, 65536, &log, &len), 0, "%s", st.log_path);
    cr_assert_eq(code, 0, "%s exited %d: %s", st.name, code, log);
    kite_container_status_release(&st);
    return log;
}

/* `runc list -q` of the runtime's state dir: one id a line. */
static char *runc_list(void) {
    _cleanup_free_ char *cmd = kite_asprintf("/usr/sbin/runc --root %s/runc list -q", root);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    char *out = kite_calloc(1, 65536);
    size_t n = fread(out, 1, 65535, f);
    out[n] = 0;
    pclose(f);
    return out;
}

static bool mounted_under(const char *dir) {
    _cleanup_free_ char *m = NULL;
    size_t len = 0;
    cr_assert_eq(kite_read_file("/proc/self/mounts", 1 << 20, &m, &len), 0);
    return strstr(m, dir) != NULL;
}

/* A sandbox without shareProcessNamespace runs no process under runc: its network, IPC and UTS
 * namespaces are bind mounts under its dir. Its containers share them (one hostname; one
 * reaches the other on localhost; the pod's net.* sysctl set in them), they outlive the runtime
 * instance, stop makes the sandbox not ready and remove leaves no mount behind. With
 * shareProcessNamespace a pause holder runs and the containers share its pid namespace. */
Test(runtime_runc, pinned_sandbox_runs_no_holder_and_shares_its_namespaces) {
    struct kite_runtime *rt = setup();
    const char *sys[] = {"net.ipv4.ip_unprivileged_port_start=100"};
    struct kite_sandbox_config sc = {.uid = "0789-uid", .name = "pinpod", .ns = "default", .sysctls = sys, .n_sysctls = 1};
    char *sid = NULL, *err = NULL;
    cr_assert_eq(rt->ops->run_sandbox(rt, &sc, 0, &sid, &err), 0, "%s", err ? err : "");
    struct kite_sandbox_status ss;
    cr_assert_eq(rt->ops->sandbox_status(rt, sid, 0, &ss), 0);
    cr_assert_eq(ss.state, KITE_SANDBOX_READY);
    _cleanup_free_ char *pod_ip = kite_strdup(ss.ip);
    kite_sandbox_status_release(&ss);
    _cleanup_free_ char *sdir = kite_asprintf("%s/sandboxes/%s/", root, sid);
    cr_assert(mounted_under(sdir), "the namespaces are pinned under %s", sdir);
    _cleanup_free_ char *listed0 = runc_list();
    cr_assert_str_eq(listed0, "", "no holder under runc: %s", listed0);

    char *srv = start(rt, sid, "srv", "echo from-srv | nc -l -p 7070 -w 2; hostname", 0, NULL);
    char *cli = start(rt, sid, "cli",
                      "hostname; cat /proc/sys/net/ipv4/ip_unprivileged_port_start; "
                      "for i in $(seq 50); do nc -w 2 127.0.0.1 7070 </dev/null && exit 0; sleep 0.1; done; exit 1",
                      0, NULL);
    _cleanup_free_ char *listed = runc_list();
    cr_assert(strstr(listed, srv) && strstr(listed, cli) && !strstr(listed, sid), "runc lists the two containers only: %s", listed);
    _cleanup_free_ char *clog = exited_log(rt, cli), *slog = exited_log(rt, srv);
    cr_assert(strstr(clog, " stdout F pinpod\n") && strstr(slog, " stdout F pinpod\n"), "one hostname: %s | %s", clog, slog);
    cr_assert(strstr(clog, " stdout F 100\n"), "the sysctl in the pod's namespace: %s", clog);
    cr_assert(strstr(clog, " stdout F from-srv\n"), "localhost is shared: %s", clog);

    /* a new runtime instance on the same root: the namespaces (and the address) are still there;
     * its runc logs its calls */
    kite_runtime_free(rt);
    _cleanup_free_ char *wrapper = kite_asprintf("%s/runc-logged", root), *calls = kite_asprintf("%s/runc-calls", root);
    _cleanup_free_ char *script = kite_asprintf("#!/bin/sh\necho \"$*\" >> %s\nexec /usr/sbin/runc \"$@\"\n", calls);
    cr_assert_eq(kite_write_file_atomic(wrapper, script, strlen(script), 0755, false), 0);
    struct kite_runc_options o = opts(root);
    o.runc_path = wrapper;
    cr_assert_eq(kite_runtime_runc_new(&o, &rt, &err), 0, "%s", err ? err : "");
    cr_assert_eq(rt->ops->sandbox_status(rt, sid, 0, &ss), 0);
    cr_assert_eq(ss.state, KITE_SANDBOX_READY);
    kite_sandbox_status_release(&ss);
    char *late = start(rt, sid, "late", "hostname; ip -4 addr show eth0", 0, NULL);
    _cleanup_free_ char *llog = exited_log(rt, late), *inet = kite_asprintf("inet %s/24", pod_ip);
    cr_assert(strstr(llog, " stdout F pinpod\n") && strstr(llog, inet), "%s", llog);

    cr_assert_eq(rt->ops->stop_sandbox(rt, sid, 0), 0);
    cr_assert_eq(rt->ops->sandbox_status(rt, sid, 0, &ss), 0);
    cr_assert_eq(ss.state, KITE_SANDBOX_NOTREADY);
    kite_sandbox_status_release(&ss);
    cr_assert_not(mounted_under(sdir), "stop unpins");
    const char *cmd[] = {"true"};
    struct kite_container_config cc = {.name = "after", .image = "busybox", .command = cmd, .n_command = 1};
    char *nid = NULL;
    cr_assert_eq(rt->ops->create_container(rt, sid, &cc, 0, &nid, &err), -ENOTCONN);
    free(err);
    err = NULL;
    cr_assert_eq(rt->ops->stop_sandbox(rt, sid, 0), 0, "stop again");
    cr_assert_eq(rt->ops->remove_sandbox(rt, sid, 0), 0);
    cr_assert_eq(access(sdir, F_OK), -1);
    cr_assert_not(mounted_under(sdir));
    _cleanup_free_ char *listed2 = runc_list();
    cr_assert_str_eq(listed2, "");

    /* shareProcessNamespace: a holder, and one pid namespace */
    struct kite_sandbox_config pc = {.uid = "0790-uid", .name = "sharepod", .ns = "default", .share_pid = true};
    char *pid_sid = NULL;
    cr_assert_eq(rt->ops->run_sandbox(rt, &pc, 0, &pid_sid, &err), 0, "%s", err ? err : "");
    _cleanup_free_ char *listed3 = runc_list();
    cr_assert(strstr(listed3, pid_sid), "the holder runs under runc: %s", listed3);
    char *sleeper = start(rt, pid_sid, "sleeper", "exec sleep 1234", 0, NULL);
    char *ps = start(rt, pid_sid, "ps", "hostname; ps -o args", 0, NULL);
    _cleanup_free_ char *plog = exited_log(rt, ps);
    cr_assert(strstr(plog, "sleep 1234") && strstr(plog, "/sleep 2147483647") && strstr(plog, " stdout F sharepod\n"),
              "the other container's and the holder's processes are seen: %s", plog);
    cr_assert_eq(rt->ops->remove_sandbox(rt, pid_sid, 0), 0);
    /* stops signal runc's init through a pidfd (after the check runc kill makes): no runc kill */
    _cleanup_free_ char *called = NULL;
    size_t clen = 0;
    cr_assert_eq(kite_read_file(calls, 1 << 20, &called, &clen), 0);
    cr_assert(strstr(called, " delete ") && !strstr(called, " kill "), "%s", called);
    _cleanup_free_ char *listed4 = runc_list();
    cr_assert_str_eq(listed4, "");
    free(sid), free(srv), free(cli), free(late), free(pid_sid), free(sleeper), free(ps);
    kite_runtime_free(rt);
}

Test(runtime_runc, import_refuses_a_corrupted_blob) {
    struct kite_runtime *rt = setup();
    /* flip one byte of the layer blob inside the tarball */
    _cleanup_free_ char *dir = kite_asprintf("%s/x", root);
    _cleanup_free_ char *cmd = kite_asprintf(
        "set -e; mkdir %s; cd %s; tar -xf %s; f=$(ls -S blobs/sha256 | head -1); chmod u+w blobs/sha256/$f; "
        "printf Z | dd of=blobs/sha256/$f bs=1 seek=100 conv=notrunc 2>/dev/null; tar -cf ../bad.tar .",
        dir, dir, tarball);
    cr_assert_eq(system(cmd), 0);
    _cleanup_free_ char *bad = kite_asprintf("%s/bad.tar", root);
    char *err = NULL;
    struct kite_runc_options o = opts(dir);
    struct kite_runtime *rt2 = NULL;
    cr_assert_eq(kite_runtime_runc_new(&o, &rt2, &err), 0);
    cr_assert_eq(rt2->ops->import_image(rt2, bad, NULL, NULL, &err), -EBADMSG);
    cr_assert(strstr(err, "content has digest"), "%s", err);
    free(err);
    struct kite_image *v = NULL;
    size_t n = 0;
    cr_assert_eq(rt2->ops->list_images(rt2, &v, &n), 0);
    cr_assert_eq(n, 0);
    kite_runtime_free(rt2);
    kite_runtime_free(rt);
}

/* Status: ready while its binaries and dirs are usable; a runc binary removed under a running
 * agent (a package removed) is named, and ready again when it is back. */
Test(runtime_runc, status_names_a_missing_binary) {
    if (access("/usr/sbin/runc", X_OK) || access("/usr/bin/conmon", X_OK)) cr_skip_test("runc or conmon missing");
    root = nst_tmpdir();
    _cleanup_free_ char *runc = kite_asprintf("%s/runc-copy", root);
    _cleanup_free_ char *cp = kite_asprintf("cp /usr/sbin/runc %s", runc);
    cr_assert_eq(system(cp), 0);
    struct kite_runc_options o = {.root_dir = root, .runc_path = runc};
    struct kite_runtime *rt = NULL;
    char *err = NULL, *reason = NULL, *msg = NULL;
    cr_assert_eq(kite_runtime_runc_new(&o, &rt, &err), 0, "%s", err ? err : "");
    cr_assert_eq(kite_runtime_status(rt, &reason, &msg), 0);
    cr_assert_eq(unlink(runc), 0);
    cr_assert_eq(kite_runtime_status(rt, &reason, &msg), -ENOENT);
    cr_assert_str_eq(reason, "RuncNotFound");
    cr_assert(strstr(msg, runc) && strstr(msg, "No such file"), "%s", msg);
    free(reason), free(msg);
    reason = msg = NULL;
    cr_assert_eq(system(cp), 0);
    cr_assert_eq(kite_runtime_status(rt, &reason, &msg), 0);
    cr_assert_null(reason);
    kite_runtime_free(rt);
}

/* A holder that is the first process of its pid namespace, killed while another process of the
 * namespace is not yet reaped: it is not a zombie (the kernel holds it in its exit until the
 * namespace is empty) but its namespaces are gone, so a container cannot join them. The sandbox
 * was taken as ready then, and a restart into it failed (StartError) before the sandbox was
 * found gone. */
Test(runtime_runc, a_holder_whose_namespaces_are_gone_is_not_alive) {
    if (geteuid() != 0) cr_skip_test("needs root (a pid namespace)");
    int hold[2], info[2];
    cr_assert_eq(pipe(hold), 0);
    cr_assert_eq(pipe(info), 0);
    pid_t h = fork();
    cr_assert_geq(h, 0);
    if (h == 0) {
        /* the namespace's processes are this one's children: the first (pid 1) is the holder,
         * the second is left a zombie, unreaped, until the test is done looking */
        if (unshare(CLONE_NEWPID) < 0) _exit(2);
        pid_t pid1 = fork();
        if (pid1 == 0) {
            for (;;) pause();
        }
        pid_t other = fork();
        if (other == 0) {
            for (;;) pause();
        }
        pid_t pids[2] = {pid1, other};
        if (write(info[1], pids, sizeof pids) != (ssize_t)sizeof pids) _exit(3);
        char b;
        if (read(hold[0], &b, 1) < 0) _exit(4);
        while (waitpid(-1, NULL, 0) > 0) {
        }
        _exit(0);
    }
    close(hold[0]);
    close(info[1]);
    pid_t pids[2];
    cr_assert_eq(read(info[0], pids, sizeof pids), (ssize_t)sizeof pids);
    cr_assert(kite_rc_holder_alive(pids[0]));
    cr_assert_eq(kill(pids[0], SIGKILL), 0);
    /* the other is killed with it and stays a zombie of h; the holder waits for it */
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        gone = !kite_rc_holder_alive(pids[0]);
        if (!gone) usleep(10000);
    }
    cr_assert(gone, "the holder still holds its namespaces");
    cr_assert(kite_rc_pid_alive(pids[0]), "the holder is in its exit, not a zombie: the case the namespaces tell");
    cr_assert_eq(write(hold[1], "x", 1), 1);
    int st = 0;
    cr_assert_eq(waitpid(h, &st, 0), h);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
    close(hold[1]);
    close(info[0]);
}
