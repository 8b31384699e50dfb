/* The pod worker: one state machine per pod, stepped by kite_pods_step(). Each sync looks at
 * what the runtime has and does the next thing (as the kubelet's computePodActions): the
 * sandbox, the first init container not yet completed, then every container that is not
 * running and should run under the restart policy, with the kubelet's back-offs. A deleted
 * pod is stopped without waiting: preStop hook, SIGTERM, and SIGKILL by a later sync once the
 * grace period is over. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/logs/logs.h"
#include "agent/pods/pods-int.h"
#include "api/podrequests.h"
#include "api/quantity.h"
#include "base/log.h"

static void ev(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, const char *type, const char *reason,
               const char *message) {
    _cleanup_free_ char *fp =
        c ? kite_asprintf("spec.%s{%s}", c->ephemeral ? "ephemeralContainers" : c->init ? "initContainers" : "containers", c->name)
          : NULL;
    kite_recorder_pod_event(&p->rec, pod->obj, fp, type, reason, message);
}

static void set_wait(struct pod_ctr *c, const char *reason, const char *message) {
    free(c->wait_reason);
    free(c->wait_message);
    c->wait_reason = reason ? kite_strdup(reason) : NULL;
    c->wait_message = message ? kite_strdup(message) : NULL;
}

/* A runtime call's result: a timeout is reported on this pod alone. */
static int rt_result(struct kite_pods *p, struct pod *pod, const char *op, int r) {
    if (r == -ETIMEDOUT) {
        if (!kite_streq(pod->hung_op, op)) {
            free(pod->hung_op);
            pod->hung_op = kite_strdup(op);
            _cleanup_free_ char *m = kite_asprintf("runtime call %s did not answer within %llds", op,
                                                   (long long)(KITE_PODS_RT_TIMEOUT_NS / KITE_NS_PER_SEC));
            ev(p, pod, NULL, "Warning", "FailedSync", m);
        }
    } else if (r == 0 && pod->hung_op) {
        free(pod->hung_op);
        pod->hung_op = NULL;
    }
    return r;
}

bool kite_pods_refresh(struct kite_pods *p, struct pod *pod) {
    bool changed = false;
    int64_t now = kite_now_mono(p->clock);
    for (size_t i = 0; i < pod->nc; i++) {
        struct pod_ctr *c = &pod->c[i];
        if (!c->id) continue;
        struct kite_container_status s = {0};
        int r = p->rt->ops->container_status(p->rt, c->id, KITE_PODS_RT_TIMEOUT_NS, &s);
        rt_result(p, pod, "container_status", r);
        if (r < 0) {
            kite_container_status_release(&s);
            continue;
        }
        if (!c->have_st || c->st.state != s.state || c->st.exit_code != s.exit_code) changed = true;
        if (s.state == KITE_CONTAINER_EXITED && !c->exit_seen) c->exit_seen = now;
        if (s.state == KITE_CONTAINER_EXITED) {
            /* the termination message, read once per attempt, after the runtime's own message */
            if (!kite_streq(c->tmsg_id, s.id)) {
                free(c->tmsg);
                free(c->tmsg_id);
                c->tmsg = kite_pods_termination_message(p, pod, c, &s);
                c->tmsg_id = kite_strdup(s.id);
            }
            if (c->tmsg && *c->tmsg) {
                char *m = s.message && *s.message ? kite_asprintf("%s: %s", s.message, c->tmsg) : kite_strdup(c->tmsg);
                free(s.message);
                s.message = m;
            }
        }
        if (c->have_st) kite_container_status_release(&c->st);
        c->st = s;
        c->have_st = true;
        if (c->init && !c->sidecar && s.state == KITE_CONTAINER_EXITED && s.exit_code == 0) c->done = true;
    }
    return changed;
}

static const char *const *strv_of(json_object *arr, size_t *ret_n) {
    size_t n = arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    const char **v = kite_calloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) v[i] = json_object_get_string(json_object_array_get_idx(arr, i));
    *ret_n = n;
    return v;
}

/* The kubelet's cgroup cpu math (MilliCPUToQuota, MilliCPUToShares): quota = milli * period /
 * 1000, at least 1 ms; shares at most 262144. A quota past what the kernel takes (2^44-1 us
 * per period) limits nothing a machine has: no quota then. */
#define KITE_CPU_PERIOD_US 100000
#define KITE_CPU_MIN_QUOTA_US 1000
#define KITE_CPU_MAX_QUOTA_US ((INT64_C(1) << 44) - 1)
#define KITE_CPU_MAX_SHARES 262144
static int64_t cpu_quota_us(int64_t limit_m) {
    if (limit_m <= 0) return 0;
    int64_t q = kite_sat_mul(limit_m, KITE_CPU_PERIOD_US / 1000);
    return q > KITE_CPU_MAX_QUOTA_US ? 0 : KITE_MAX(q, KITE_CPU_MIN_QUOTA_US);
}

static int64_t limit_milli(json_object *ctr, const char *name) {
    const char *s = kite_agent_pjs(ctr, "resources.limits") ? NULL : NULL;
    json_object *lim = kite_agent_pj(ctr, "resources.limits");
    s = kite_agent_pjs(lim, name);
    int64_t m = 0;
    return s && kite_quantity_parse_milli(s, &m) == 0 ? m : 0;
}

/* The image: present in the store, or "pulled" (there is no registry yet: an image not in the
 * store is a failed pull), with the kubelet's image back-off. */
static bool ensure_image(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, int64_t now, char **ret_user) {
    const char *image = kite_agent_pjs(c->spec, "image");
    const char *policy = kite_agent_pjs(c->spec, "imagePullPolicy");
    struct kite_image img = {0};
    int r = image ? p->rt->ops->image_status(p->rt, image, &img) : -EINVAL;
    rt_result(p, pod, "image_status", r);
    if (r == 0) {
        *ret_user = TAKE_PTR(img.user);
        kite_image_release(&img);
        c->img_delay = 0;
        if (!c->pulled_event) {
            _cleanup_free_ char *m = kite_asprintf("Container image \"%s\" already present on machine", image);
            ev(p, pod, c, "Normal", "Pulled", m);
            c->pulled_event = true;
        }
        return true;
    }
    if (kite_streq(policy, "Never")) {
        _cleanup_free_ char *m = kite_asprintf("Container image \"%s\" is not present with pull policy of Never", image);
        if (!kite_streq(c->wait_reason, "ErrImageNeverPull")) ev(p, pod, c, "Warning", "ErrImageNeverPull", m);
        set_wait(c, "ErrImageNeverPull", m);
        pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
        return false;
    }
    /* the pull's error as kubelet 1.32 words it: the ErrImagePull message is the error, the
     * back-off's message carries it after the reason */
    _cleanup_free_ char *perr = kite_asprintf("image \"%s\" not found in the node's image store (this node pulls "
                                              "from no registry: import it with kite images import)", image ? image : "");
    if (c->img_delay && now < c->img_next) {
        _cleanup_free_ char *e = kite_asprintf("Back-off pulling image \"%s\"", image ? image : "");
        _cleanup_free_ char *m = kite_asprintf("%s: ErrImagePull: %s", e, perr);
        if (!kite_streq(c->wait_reason, "ImagePullBackOff")) ev(p, pod, c, "Normal", "BackOff", e);
        set_wait(c, "ImagePullBackOff", m);
        pod->next_sync = c->img_next;
        return false;
    }
    _cleanup_free_ char *pulling = kite_asprintf("Pulling image \"%s\"", image ? image : "");
    ev(p, pod, c, "Normal", "Pulling", pulling);
    _cleanup_free_ char *m = kite_asprintf("Failed to pull image \"%s\": %s", image ? image : "", perr);
    ev(p, pod, c, "Warning", "Failed", m);
    ev(p, pod, c, "Warning", "Failed", "Error: ErrImagePull");
    set_wait(c, "ErrImagePull", perr);
    c->img_delay = kite_backoff_step(c->img_delay, p->backoff_base_ns, KITE_PODS_BACKOFF_MAX_NS);
    c->img_next = now + c->img_delay;
    /* look again soon: the waiting reason turns to ImagePullBackOff for the back-off's length */
    pod->next_sync = now + KITE_PODS_PULL_RECHECK_NS;
    return false;
}

/* The most supplementalGroups (and fsGroup) a container gets; past it: CreateContainerConfigError. */
#define KITE_PODS_MAX_GROUPS 64

/* A securityContext field: the container's, else the pod's. */
static json_object *sc(struct pod *pod, struct pod_ctr *c, const char *field) {
    _cleanup_free_ char *cp = kite_asprintf("securityContext.%s", field), *pp = kite_asprintf("spec.securityContext.%s", field);
    json_object *v = kite_agent_pj(c->spec, cp);
    return v ? v : kite_agent_pj(pod->obj, pp);
}

/* The image's user as the CRI's ImageStatus gives it: *uid for a numeric one ("1000",
 * "1000:50"), else false with the name in *name; none is root. */
static bool image_uid(const char *user, int64_t *uid, const char **name) {
    *uid = 0;
    *name = NULL;
    if (!user || !*user) return true;
    size_t n = strcspn(user, ":");
    char *end = NULL;
    errno = 0;
    long long v = n && isdigit((unsigned char)user[0]) ? strtoll(user, &end, 10) : -1;
    if (v < 0 || errno || end != user + n) {
        *name = user;
        return false;
    }
    *uid = v;
    return true;
}

/* The container's securityContext over the pod's, as the kubelet resolves it, runAsNonRoot
 * checked against runAsUser or else the image's user (image_user: its config's User, NULL =
 * root), as the kubelet's verifyRunAsNonRoot. NULL, or the CreateContainerConfigError message. */
static char *security_of(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, const char *image_user,
                         struct kite_security_config *sec, uint32_t *groups, char **localhost) {
    json_object *v;
    if ((v = sc(pod, c, "runAsUser"))) sec->has_uid = true, sec->uid = (uint32_t)json_object_get_int64(v);
    if ((v = sc(pod, c, "runAsGroup"))) sec->has_gid = true, sec->gid = (uint32_t)json_object_get_int64(v);
    json_object *sg = kite_agent_pj(pod->obj, "spec.securityContext.supplementalGroups");
    size_t n = sg && json_object_is_type(sg, json_type_array) ? json_object_array_length(sg) : 0;
    json_object *fsg = kite_agent_pj(pod->obj, "spec.securityContext.fsGroup");
    if (n + (fsg ? 1 : 0) > KITE_PODS_MAX_GROUPS)
        return kite_asprintf("more than %d supplementalGroups", KITE_PODS_MAX_GROUPS);
    if (fsg) groups[sec->n_groups++] = (uint32_t)json_object_get_int64(fsg);
    for (size_t i = 0; i < n; i++) groups[sec->n_groups++] = (uint32_t)json_object_get_int64(json_object_array_get_idx(sg, i));
    sec->groups = groups;
    sec->readonly_root = json_object_get_boolean(kite_agent_pj(c->spec, "securityContext.readOnlyRootFilesystem"));
    sec->privileged = json_object_get_boolean(kite_agent_pj(c->spec, "securityContext.privileged"));
    v = kite_agent_pj(c->spec, "securityContext.allowPrivilegeEscalation");
    sec->no_new_privs = v && !json_object_get_boolean(v);
    sec->cap_add = strv_of(kite_agent_pj(c->spec, "securityContext.capabilities.add"), &sec->n_cap_add);
    sec->cap_drop = strv_of(kite_agent_pj(c->spec, "securityContext.capabilities.drop"), &sec->n_cap_drop);
    sec->proc_unmasked = kite_streq(kite_agent_pjs(c->spec, "securityContext.procMount"), "Unmasked");
    /* seccompProfile: when none is set, Unconfined (the kubelet's default) or RuntimeDefault
     * (--seccomp-default) */
    json_object *sp = sc(pod, c, "seccompProfile");
    const char *st = sp ? kite_agent_pjs(sp, "type") : p->seccomp_default ? "RuntimeDefault" : NULL;
    if (kite_streq(st, "RuntimeDefault")) sec->seccomp = KITE_SECCOMP_RUNTIME_DEFAULT;
    else if (kite_streq(st, "Localhost")) {
        const char *lp = kite_agent_pjs(sp, "localhostProfile");
        if (!lp || !*lp || lp[0] == '/' || strstr(lp, ".."))
            return kite_asprintf("invalid localhostProfile \"%s\": a path relative to the seccomp profile root without \"..\"",
                                 lp ? lp : "");
        if (!p->root_dir) return kite_strdup("no seccomp profile root on this node (the agent runs without a root dir)");
        sec->seccomp = KITE_SECCOMP_LOCALHOST;
        *localhost = kite_asprintf("%s/seccomp/%s", p->root_dir, lp);
        sec->seccomp_localhost = *localhost;
    }
    if (json_object_get_boolean(sc(pod, c, "runAsNonRoot"))) {
        if (sec->has_uid && sec->uid == 0)
            return kite_asprintf("container's runAsUser breaks non-root policy (pod: \"%s_%s(%s)\", container: %s)",
                                 pod->name, pod->ns, pod->uid, c->name);
        int64_t iuid;
        const char *iname;
        bool numeric = image_uid(image_user, &iuid, &iname);
        if (!sec->has_uid && numeric && iuid == 0)
            return kite_asprintf("container has runAsNonRoot and image will run as root (pod: \"%s_%s(%s)\", container: %s)",
                                 pod->name, pod->ns, pod->uid, c->name);
        if (!sec->has_uid && !numeric)
            return kite_asprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is "
                                 "non-root (pod: \"%s_%s(%s)\", container: %s)",
                                 iname, pod->name, pod->ns, pod->uid, c->name);
    }
    return NULL;
}

/* The pod's hostname as its containers see it: spec.hostname or the pod's name (cut to 63
 * characters, as the kubelet's GeneratePodHostNameAndDomain), the node's with hostNetwork. */
static char *pod_hostname(struct pod *pod) {
    json_object *hn = kite_agent_pj(pod->obj, "spec.hostNetwork");
    if (hn && json_object_get_boolean(hn)) {
        char h[256] = "";
        if (gethostname(h, sizeof h - 1) == 0) return kite_strdup(h);
    }
    const char *n = kite_agent_pjs(pod->obj, "spec.hostname");
    if (!n || !*n) n = pod->name;
    return kite_strndup(n, KITE_MIN(strlen(n), (size_t)63));
}

/* ---- termination messages ---- */

static const char *term_msg_path(struct pod_ctr *c) {
    json_object *v = kite_agent_pj(c->spec, "terminationMessagePath");
    return v ? json_object_get_string(v) : "/dev/termination-log"; /* the API's default */
}

/* The host file behind a container attempt's terminationMessagePath, as the kubelet's
 * pods/<uid>/containers/<name>/<n>; NULL without a root dir. */
static char *term_msg_file(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, uint32_t attempt) {
    _cleanup_free_ char *dir = kite_pods_pod_dir(p, pod->uid);
    return dir ? kite_asprintf("%s/containers/%s/%u", dir, c->name, attempt) : NULL;
}

/* An empty file every user of the container may write, bind-mounted at terminationMessagePath
 * (unless a volume is mounted there). */
static int term_msg_mount(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, uint32_t attempt,
                          struct kite_mount **mounts, size_t *n, char ***paths, char **ret_err) {
    const char *tp = term_msg_path(c);
    _cleanup_free_ char *file = term_msg_file(p, pod, c, attempt);
    if (!file || !tp || tp[0] != '/') return 0;
    json_object *vm = kite_agent_pj(c->spec, "volumeMounts");
    for (size_t i = 0; vm && json_object_is_type(vm, json_type_array) && i < json_object_array_length(vm); i++)
        if (kite_streq(kite_agent_pjs(json_object_array_get_idx(vm, i), "mountPath"), tp)) return 0;
    _cleanup_free_ char *dir = kite_strdup(file);
    *strrchr(dir, '/') = 0;
    int r = kite_mkdir_p(dir, 0750);
    int fd = r < 0 ? -1 : open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0 || fchmod(fd, 0666) < 0) {
        int e = r < 0 ? -r : errno;
        if (fd >= 0) close(fd);
        *ret_err = kite_asprintf("creating the termination message file %s: %s", file, strerror(e));
        return -e;
    }
    close(fd);
    *mounts = kite_realloc(*mounts, (*n + 1) * sizeof(**mounts));
    *paths = kite_realloc(*paths, (*n + 1) * sizeof(char *));
    (*paths)[*n] = TAKE_PTR(file);
    (*mounts)[*n] = (struct kite_mount){.host_path = (*paths)[*n], .container_path = tp};
    (*n)++;
    return 0;
}

/* The last max bytes of what the container's log holds in its last KITE_PODS_TERM_LOG_LINES
 * lines, as the kubelet's readLastStringFromContainerLogs. */
static char *log_tail(const char *path, size_t max) {
    struct kite_crilog l;
    struct kite_crilog_options o = {.tail_lines = KITE_PODS_TERM_LOG_LINES};
    if (!path || !*path || kite_crilog_open(&l, path, &o) < 0) return NULL;
    struct kite_buf b = {0};
    while (kite_crilog_read(&l, &b) == 1) {
    }
    kite_crilog_close(&l);
    size_t from = b.len > max ? b.len - max : 0;
    char *out = b.len ? kite_strndup(b.p + from, b.len - from) : NULL;
    kite_buf_release(&b);
    return out;
}

char *kite_pods_termination_message(struct kite_pods *p, struct pod *pod, struct pod_ctr *c,
                               const struct kite_container_status *s) {
    bool fallback = kite_streq(kite_agent_pjs(c->spec, "terminationMessagePolicy"), "FallbackToLogsOnError") &&
                    s->exit_code != 0 && !kite_streq(s->reason, "StartError");
    _cleanup_free_ char *file = term_msg_file(p, pod, c, s->attempt);
    char *msg = NULL;
    int fd = file ? open(file, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        /* its last KITE_PODS_TERM_MSG_MAX bytes, as the kubelet's tail.ReadAtMost */
        struct stat st;
        off_t from = fstat(fd, &st) == 0 && st.st_size > KITE_PODS_TERM_MSG_MAX ? st.st_size - KITE_PODS_TERM_MSG_MAX : 0;
        char buf[KITE_PODS_TERM_MSG_MAX];
        ssize_t n = pread(fd, buf, sizeof buf, from);
        close(fd);
        if (n > 0) msg = kite_strndup(buf, (size_t)n);
    }
    if (!msg && fallback) msg = log_tail(s->log_path, KITE_PODS_TERM_LOG_BYTES);
    return msg;
}

/* Creates and starts the container's next attempt. */
static bool start_ctr(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, int64_t now) {
    _cleanup_free_ char *image_user = NULL;
    if (!ensure_image(p, pod, c, now, &image_user)) return false;
    struct pods_env penv = {0};
    char *env_err = NULL;
    _cleanup_free_ char *hostname = pod_hostname(pod);
    if (kite_pods_env_build(p, pod, c->spec, hostname, &penv, &env_err) < 0) {
        _cleanup_free_ char *m = kite_asprintf("Error: %s", env_err);
        if (!kite_streq(c->wait_message, env_err)) ev(p, pod, c, "Warning", "Failed", m);
        set_wait(c, "CreateContainerConfigError", env_err);
        free(env_err);
        kite_pods_env_release(&penv);
        pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
        return false;
    }
    size_t ncmd = 0, nargs = 0, nenv = penv.n;
    char **cmd = kite_pods_env_expand_argv(kite_agent_pj(c->spec, "command"), &penv, &ncmd);
    char **args = kite_pods_env_expand_argv(kite_agent_pj(c->spec, "args"), &penv, &nargs);
    char **env = kite_calloc(nenv + 1, sizeof(char *));
    for (size_t i = 0; i < nenv; i++) env[i] = kite_asprintf("%s=%s", penv.k[i], penv.v[i]);
    kite_pods_env_release(&penv);
    int64_t mem = limit_milli(c->spec, "memory") / 1000, cpu = limit_milli(c->spec, "cpu");
    int64_t cpu_req = 0;
    const char *rq = kite_agent_pjs(kite_agent_pj(c->spec, "resources.requests"), "cpu");
    if (rq) kite_quantity_parse_milli(rq, &cpu_req);
    if (!cpu_req) cpu_req = cpu;
    uint32_t attempt = c->id ? c->restarts + 1 : c->restarts;
    struct kite_mount *mounts = NULL;
    size_t nmounts = 0;
    char **mount_paths = NULL, *merr = NULL;
    /* the container's mounts, then its security settings: either failing is the kubelet's
     * CreateContainerConfigError, retried */
    uint32_t groups[KITE_PODS_MAX_GROUPS];
    struct kite_security_config sec = {0};
    char *cerr = NULL;
    _cleanup_free_ char *seccomp_file = NULL;
    if (kite_pods_volumes_mounts(p, pod, c->spec, &mounts, &nmounts, &mount_paths, &merr) < 0 ||
        kite_pods_etc_mounts(p, pod, c->spec, hostname, &mounts, &nmounts, &mount_paths, &merr) < 0 ||
        term_msg_mount(p, pod, c, attempt, &mounts, &nmounts, &mount_paths, &merr) < 0)
        cerr = merr;
    else
        cerr = security_of(p, pod, c, image_user, &sec, groups, &seccomp_file);
    if (cerr) {
        kite_strv_free(cmd, ncmd);
        kite_strv_free(args, nargs);
        free((void *)sec.cap_add);
        free((void *)sec.cap_drop);
        kite_strv_free(env, nenv);
        kite_strv_free(mount_paths, nmounts);
        free(mounts);
        _cleanup_free_ char *m = kite_asprintf("Error: %s", cerr);
        ev(p, pod, c, "Warning", "Failed", m);
        set_wait(c, "CreateContainerConfigError", cerr);
        free(cerr);
        pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
        return false;
    }
    struct kite_container_config cfg = {
        .sec = sec,
        .name = c->name, .attempt = attempt, .image = kite_agent_pjs(c->spec, "image"), .command = (const char *const *)cmd,
        .n_command = ncmd, .args = (const char *const *)args, .n_args = nargs, .env = (const char *const *)env, .n_env = nenv,
        .working_dir = kite_agent_pjs(c->spec, "workingDir"), .memory_limit_bytes = mem, .mounts = mounts, .n_mounts = nmounts,
        .cpu_quota_us = cpu_quota_us(cpu), .cpu_period_us = cpu_quota_us(cpu) ? KITE_CPU_PERIOD_US : 0,
        .cpu_shares = cpu_req ? KITE_MAX(KITE_MIN(cpu_req, KITE_CPU_MAX_SHARES * 1000 / 1024) * 1024 / 1000, 2) : 0};
    /* stdin and tty as the spec asks (attach reads and writes them); an ephemeral container
     * joins the pid namespace of its targetContainerName */
    json_object *si = kite_agent_pj(c->spec, "stdin"), *so = kite_agent_pj(c->spec, "stdinOnce"), *tt = kite_agent_pj(c->spec, "tty");
    cfg.stdin_open = si && json_object_get_boolean(si);
    cfg.stdin_once = so && json_object_get_boolean(so);
    cfg.tty = tt && json_object_get_boolean(tt);
    const char *target = c->ephemeral ? kite_agent_pjs(c->spec, "targetContainerName") : NULL;
    for (size_t i = 0; target && *target && i < pod->n_main; i++)
        if (kite_streq(pod->c[i].name, target)) cfg.pid_ns_of = pod->c[i].id ? pod->c[i].id : "";
    char *id = NULL, *err = NULL;
    int r = rt_result(p, pod, "create_container", p->rt->ops->create_container(p->rt, pod->sandbox_id, &cfg,
                                                                              KITE_PODS_RT_TIMEOUT_NS, &id, &err));
    kite_strv_free(cmd, ncmd);
    kite_strv_free(args, nargs);
    kite_strv_free(env, nenv);
    kite_strv_free(mount_paths, nmounts);
    free(mounts);
    free((void *)sec.cap_add);
    free((void *)sec.cap_drop);
    if (r < 0) {
        _cleanup_free_ char *m = kite_asprintf("Error: %s", err ? err : strerror(-r));
        ev(p, pod, c, "Warning", "Failed", m);
        set_wait(c, "CreateContainerError", err ? err : strerror(-r));
        free(err);
        pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
        return false;
    }
    free(err);
    err = NULL;
    _cleanup_free_ char *created = kite_asprintf("Created container %s", c->name);
    ev(p, pod, c, "Normal", "Created", created);
    if (c->id) {
        /* the attempt before the previous one goes; the previous stays for its lastState */
        if (c->prev_id) {
            p->rt->ops->remove_container(p->rt, c->prev_id, KITE_PODS_RT_TIMEOUT_NS);
            /* its log goes too, as the kubelet's container GC removes it; the previous
             * attempt's stays for `kubectl logs --previous` */
            if (c->have_last && c->last.log_path && *c->last.log_path && c->last.attempt != attempt &&
                (!c->have_st || !kite_streq(c->st.log_path, c->last.log_path)))
                unlink(c->last.log_path);
        }
        free(c->prev_id);
        c->prev_id = c->id;
        if (c->have_last) kite_container_status_release(&c->last);
        c->last = c->st;
        c->have_last = c->have_st;
        c->have_st = false;
        memset(&c->st, 0, sizeof(c->st));
        c->restarts++;
    }
    if (c->id) kite_pods_prober_remove(p->prober, c->id, NULL);
    c->id = id;
    c->exit_seen = 0;
    c->probe_ready = c->probe_started = false;
    c->probe_kill_at = 0;
    set_wait(c, NULL, NULL);
    r = rt_result(p, pod, "start_container", p->rt->ops->start_container(p->rt, id, KITE_PODS_RT_TIMEOUT_NS, &err));
    if (r < 0) {
        _cleanup_free_ char *m = kite_asprintf("Error: %s", err ? err : strerror(-r));
        ev(p, pod, c, "Warning", "Failed", m);
        /* the process could not start (StartError, exit 128): a container that runs again
         * waits in RunContainerError, then CrashLoopBackOff; under restartPolicy Never its
         * terminated state stays, and the pod fails */
        if (r == -ENOEXEC && (c->sidecar || strcmp(kite_pods_restart_policy(pod), "Always") == 0 ||
                              strcmp(kite_pods_restart_policy(pod), "OnFailure") == 0))
        {
            set_wait(c, "RunContainerError", err ? err : strerror(-r));
            pod->next_sync = now + 1; /* its first restart is at once, as after any exit */
        }
        free(err);
    } else {
        _cleanup_free_ char *started = kite_asprintf("Started container %s", c->name);
        ev(p, pod, c, "Normal", "Started", started);
    }
    kite_pods_refresh(p, pod);
    /* A process that ended before the runtime watched it sends no exit event, and the relist
     * (10 s) finds nothing new once the refresh above saw the exit: the pod is synced again at
     * once then, and a second after any start in case it ends between that refresh and the
     * watch (the kubelet's PLEG relists every second). */
    if (r == 0) {
        int64_t at = c->have_st && c->st.state == KITE_CONTAINER_EXITED ? now + 1 : now + KITE_PODS_POST_START_CHECK_NS;
        if (!pod->next_sync || at < pod->next_sync) pod->next_sync = at;
    }
    return r == 0;
}

/* An exited container to run again, after the CrashLoopBackOff delay: the first restart is
 * immediate, then 10 s (--restart-backoff-base) doubling to 300 s, reset once no crash came for
 * 10 minutes. */
static void restart_ctr(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, int64_t now) {
    if (c->bo_delay && now - c->bo_update > KITE_PODS_BACKOFF_RESET_NS) c->bo_delay = 0;
    if (c->bo_delay && now - c->exit_seen < c->bo_delay) {
        _cleanup_free_ char *m = kite_asprintf("back-off %llds restarting failed container=%s pod=%s_%s(%s)",
                                               (long long)(c->bo_delay / KITE_NS_PER_SEC), c->name, pod->name, pod->ns,
                                               pod->uid);
        if (!kite_streq(c->wait_reason, "CrashLoopBackOff")) {
            _cleanup_free_ char *e = kite_asprintf("Back-off restarting failed container %s in pod %s_%s(%s)", c->name,
                                                   pod->name, pod->ns, pod->uid);
            ev(p, pod, c, "Warning", "BackOff", e);
        }
        set_wait(c, "CrashLoopBackOff", m);
        int64_t at = c->exit_seen + c->bo_delay;
        if (!pod->next_sync || at < pod->next_sync) pod->next_sync = at;
        return;
    }
    c->bo_delay = kite_backoff_step(c->bo_delay, p->backoff_base_ns, KITE_PODS_BACKOFF_MAX_NS);
    c->bo_update = now;
    start_ctr(p, pod, c, now);
}

static bool should_restart(const char *policy, int code) {
    if (strcmp(policy, "Always") == 0) return true;
    if (strcmp(policy, "OnFailure") == 0) return code != 0;
    return false;
}

static bool ensure_sandbox(struct kite_pods *p, struct pod *pod, int64_t now) {
    if (pod->sandbox_id) return true;
    json_object *hn = kite_agent_pj(pod->obj, "spec.hostNetwork"), *hp = kite_agent_pj(pod->obj, "spec.hostPID"),
                *hi = kite_agent_pj(pod->obj, "spec.hostIPC"), *sp = kite_agent_pj(pod->obj, "spec.shareProcessNamespace");
    /* the pod's sysctls (admitted: the safe set) */
    json_object *sv = kite_agent_pj(pod->obj, "spec.securityContext.sysctls");
    size_t nsys = sv && json_object_is_type(sv, json_type_array) ? json_object_array_length(sv) : 0;
    char **sys = kite_calloc(nsys + 1, sizeof(char *));
    for (size_t i = 0; i < nsys; i++) {
        json_object *x = json_object_array_get_idx(sv, i);
        _cleanup_free_ char *n = kite_pods_sysctl_normalize(kite_agent_pjs(x, "name") ?: "");
        sys[i] = kite_asprintf("%s=%s", n, kite_agent_pjs(x, "value") ?: "");
    }
    struct kite_sandbox_config cfg = {.uid = pod->uid, .name = pod->name, .ns = pod->ns,
                                      .host_network = hn && json_object_get_boolean(hn),
                                      .host_pid = hp && json_object_get_boolean(hp),
                                      .host_ipc = hi && json_object_get_boolean(hi),
                                      .share_pid = sp && json_object_get_boolean(sp),
                                      .hostname = kite_agent_pjs(pod->obj, "spec.hostname"),
                                      .sysctls = (const char *const *)sys, .n_sysctls = nsys};
    char *id = NULL, *err = NULL;
    int r = rt_result(p, pod, "run_sandbox",
                      p->rt->ops->run_sandbox(p->rt, &cfg, KITE_PODS_RT_TIMEOUT_NS, &id, &err));
    kite_strv_free(sys, nsys);
    if (r < 0) {
        _cleanup_free_ char *m = kite_asprintf("Failed to create pod sandbox: %s", err ? err : strerror(-r));
        ev(p, pod, NULL, "Warning", "FailedCreatePodSandBox", m);
        free(err);
        pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
        return false;
    }
    free(err);
    pod->sandbox_id = id;
    struct kite_sandbox_status s = {0};
    if (p->rt->ops->sandbox_status(p->rt, id, KITE_PODS_RT_TIMEOUT_NS, &s) == 0) {
        free(pod->sandbox_ip);
        pod->sandbox_ip = kite_strdup(s.ip ? s.ip : "");
    }
    kite_sandbox_status_release(&s);
    return true;
}

/* The sandbox's holder has ended under a pod that runs (the kubelet's PodSandboxChanged): its
 * containers are stopped and the sandbox stopped, kept for their records until the pod goes;
 * PodReadyToStartContainers turns False, and the next sync makes a new sandbox whose containers
 * start again (under restartPolicy Never with a container started, the pod fails instead, as the
 * kubelet creates no new sandbox then). False when it was gone. */
static bool ctr_running(struct pod_ctr *c);
static bool sandbox_alive(struct kite_pods *p, struct pod *pod, int64_t now) {
    struct kite_sandbox_status s = {0};
    int r = p->rt->ops->sandbox_status(p->rt, pod->sandbox_id, KITE_PODS_RT_TIMEOUT_NS, &s);
    bool ready = r == 0 ? s.state == KITE_SANDBOX_READY : r != -ENOENT;
    if (r == 0) kite_sandbox_status_release(&s);
    if (ready) return true;
    log_info(PODS_LOG, "pod %s/%s: sandbox %s is gone", pod->ns, pod->name, pod->sandbox_id);
    ev(p, pod, NULL, "Normal", "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.");
    for (size_t i = 0; i < pod->nc; i++)
        if (ctr_running(&pod->c[i]))
            rt_result(p, pod, "stop_container", p->rt->ops->stop_container(p->rt, pod->c[i].id, 0, KITE_PODS_RT_TIMEOUT_NS));
    rt_result(p, pod, "stop_sandbox", p->rt->ops->stop_sandbox(p->rt, pod->sandbox_id, KITE_PODS_RT_TIMEOUT_NS));
    if (pod->old_sandbox_id) p->rt->ops->remove_sandbox(p->rt, pod->old_sandbox_id, KITE_PODS_RT_TIMEOUT_NS);
    free(pod->old_sandbox_id);
    pod->old_sandbox_id = pod->sandbox_id;
    pod->sandbox_id = NULL;
    kite_pods_refresh(p, pod);
    pod->next_sync = now + 1;
    return false;
}

/* Volumes before any container, as the kubelet's WaitForAttachAndMount: a failure leaves the
 * containers in ContainerCreating with a FailedMount event, and is tried again later. Every
 * sync sets them up again, which rewrites the files of a configMap, secret, downwardAPI or
 * projected volume that changed; once the pod's volumes were all set up, a failure there
 * (its ConfigMap deleted, say) is an event and leaves the running pod its files. */
static bool ensure_volumes(struct kite_pods *p, struct pod *pod, int64_t now) {
    _cleanup_free_ char *vol = NULL, *err = NULL;
    pod->volumes_polled = false;
    pod->token_refresh_at = 0;
    int r = kite_pods_volumes_setup(p, pod, &vol, &err);
    if (pod->volumes_polled) pod->next_sync = now + KITE_PODS_VOLUME_POLL_NS; /* not watched: look again */
    if (pod->token_refresh_at) { /* a projected token is due then (wall): sync again at that moment */
        int64_t at = now + KITE_MAX(pod->token_refresh_at - kite_now_wall(p->clock), 0);
        if (!pod->next_sync || at < pod->next_sync) pod->next_sync = at;
    }
    if (r < 0) {
        _cleanup_free_ char *m = kite_asprintf("MountVolume.SetUp failed for volume \"%s\" : %s", vol, err);
        ev(p, pod, NULL, "Warning", "FailedMount", m);
        pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
        return pod->volumes_ready;
    }
    pod->volumes_ready = true;
    return true;
}

static bool ctr_running(struct pod_ctr *c) { return c->have_st && c->st.state == KITE_CONTAINER_RUNNING; }

/* ---- termination ---- */

/* A preStop hook on a thread of its own: the pod's worker does not wait for it, hooks of
 * several containers run together, and each has the pod's whole grace period. */
struct hook_job {
    struct kite_pods *p;
    char *uid, *ctr, *cid;
    char **argv;
    size_t argc;
    int64_t timeout;
};

static void *hook_thread(void *ud) {
    struct hook_job *j = ud;
    struct kite_pods *p = j->p;
    struct kite_exec_result er = {0};
    int r = p->rt->ops->exec_sync(p->rt, j->cid, (const char *const *)j->argv, j->argc, j->timeout, &er);
    char *error = NULL;
    if (r == -ETIMEDOUT)
        error = kite_asprintf("PreStopHook failed: the hook did not end within the grace period (%llds)",
                              (long long)(j->timeout / KITE_NS_PER_SEC));
    else if (r < 0 || er.exit_code != 0)
        error = kite_asprintf("PreStopHook failed: %s", r < 0 ? strerror(-r) : "non-zero exit code");
    free(er.output);
    pthread_mutex_lock(&p->lock);
    p->hook_done = kite_realloc(p->hook_done, (p->n_hook_done + 1) * sizeof(*p->hook_done));
    p->hook_done[p->n_hook_done++] = (struct hook_done){.uid = j->uid, .ctr = j->ctr, .error = error};
    uint64_t one = 1;
    if (write(p->wake_fd, &one, sizeof(one)) < 0) {
    }
    /* last: once n_hooks is 0 the stop may close wake_fd and free p */
    p->n_hooks--;
    pthread_cond_broadcast(&p->hooks_cv);
    pthread_mutex_unlock(&p->lock);
    free(j->cid);
    kite_strv_free(j->argv, j->argc);
    free(j);
    return NULL;
}

int kite_pods_thread_spawn(void *(*fn)(void *), void *arg) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, KITE_PODS_THREAD_STACK);
    pthread_t t;
    int r = -pthread_create(&t, &a, fn, arg);
    pthread_attr_destroy(&a);
    return r;
}

/* Starts the container's preStop hook; false when it has none to run (or it could not start). */
static bool hook_start(struct kite_pods *p, struct pod *pod, struct pod_ctr *c) {
    json_object *hook = kite_agent_pj(c->spec, "lifecycle.preStop.exec.command");
    if (!hook || !json_object_is_type(hook, json_type_array) || !json_object_array_length(hook) || pod->grace_s <= 0 ||
        !pod->in_api)
        return false;
    struct hook_job *j = kite_calloc(1, sizeof(*j));
    *j = (struct hook_job){.p = p, .uid = kite_strdup(pod->uid), .ctr = kite_strdup(c->name), .cid = kite_strdup(c->id),
                           .timeout = kite_sec_to_ns(pod->grace_s)};
    j->argc = json_object_array_length(hook);
    j->argv = kite_calloc(j->argc + 1, sizeof(char *));
    for (size_t i = 0; i < j->argc; i++) j->argv[i] = kite_strdup(json_object_get_string(json_object_array_get_idx(hook, i)));
    pthread_mutex_lock(&p->lock);
    p->n_hooks++;
    pthread_mutex_unlock(&p->lock);
    if (!p->n_workers || kite_pods_thread_spawn(hook_thread, j) < 0) {
        /* no threads (unit tests): the hook runs here */
        hook_thread(j);
    }
    c->hook_running = true;
    return true;
}

/* A finished hook: its container's SIGTERM follows; after a hook the container has at least
 * KITE_PODS_HOOK_MIN_GRACE_S to stop (the kubelet's minimumGracePeriodInSeconds). */
static void hook_finished(struct kite_pods *p, struct hook_done *h) {
    struct pod *pod = NULL;
    for (size_t i = 0; i < p->n_pods && !pod; i++)
        if (strcmp(p->pods[i]->uid, h->uid) == 0) pod = p->pods[i];
    for (size_t i = 0; pod && i < pod->nc; i++) {
        struct pod_ctr *c = &pod->c[i];
        if (strcmp(c->name, h->ctr) != 0 || !c->hook_running) continue;
        c->hook_running = false;
        if (h->error) ev(p, pod, c, "Warning", "FailedPreStopHook", h->error);
        int64_t floor = kite_now_mono(p->clock) + KITE_PODS_HOOK_MIN_GRACE_S * KITE_NS_PER_SEC;
        if (pod->in_api && pod->grace_s > 0 && floor > pod->kill_floor) pod->kill_floor = floor;
        pod->dirty = true;
    }
    free(h->uid);
    free(h->ctr);
    free(h->error);
}

void kite_pods_hooks_apply(struct kite_pods *p) {
    pthread_mutex_lock(&p->lock);
    struct hook_done *v = TAKE_PTR(p->hook_done);
    size_t n = p->n_hook_done;
    p->n_hook_done = 0;
    pthread_mutex_unlock(&p->lock);
    struct hook_done *held = TAKE_PTR(p->held_hooks);
    size_t n_held = p->n_held_hooks;
    p->n_held_hooks = 0;
    for (size_t k = 0; k < n_held + n; k++) {
        struct hook_done *h = k < n_held ? &held[k] : &v[k - n_held];
        struct pod *pod = NULL;
        for (size_t i = 0; i < p->n_pods && !pod; i++)
            if (strcmp(p->pods[i]->uid, h->uid) == 0) pod = p->pods[i];
        if (pod && pod->busy) { /* its worker has it: later */
            p->held_hooks = kite_realloc(p->held_hooks, (p->n_held_hooks + 1) * sizeof(*p->held_hooks));
            p->held_hooks[p->n_held_hooks++] = *h;
            continue;
        }
        hook_finished(p, h);
    }
    free(held);
    free(v);
}

void kite_pods_hooks_wait(struct kite_pods *p) {
    pthread_mutex_lock(&p->lock);
    while (p->n_hooks) pthread_cond_wait(&p->hooks_cv, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

void kite_pods_hooks_release(struct kite_pods *p) {
    kite_pods_hooks_wait(p);
    for (size_t i = 0; i < p->n_hook_done; i++) free(p->hook_done[i].uid), free(p->hook_done[i].ctr), free(p->hook_done[i].error);
    for (size_t i = 0; i < p->n_held_hooks; i++)
        free(p->held_hooks[i].uid), free(p->held_hooks[i].ctr), free(p->held_hooks[i].error);
    free(p->hook_done);
    free(p->held_hooks);
    p->hook_done = p->held_hooks = NULL;
    p->n_hook_done = p->n_held_hooks = 0;
}

/* The stop of one running container: Killing, its preStop hook, or SIGTERM (after its hook). */
static void stop_one(struct kite_pods *p, struct pod *pod, struct pod_ctr *c) {
    if (c->term_sent || c->hook_running) return;
    if (!c->stop_begun) {
        c->stop_begun = true;
        _cleanup_free_ char *m = kite_asprintf("Stopping container %s", c->name);
        ev(p, pod, c, "Normal", "Killing", m);
        if (hook_start(p, pod, c)) return;
    }
    c->term_sent = true;
    if (pod->grace_s <= 0) return; /* killed at once */
    if (strcmp(p->rt->ops->name, "runc") != 0 || c->st.pid <= 0) {
        p->rt->ops->stop_container(p->rt, c->id, kite_sec_to_ns(pod->grace_s), KITE_PODS_RT_TIMEOUT_NS);
    } else if (kill(c->st.pid, SIGTERM) < 0 && errno != ESRCH) {
        log_warn(PODS_LOG, "pod %s/%s: SIGTERM to %s: %s", pod->ns, pod->name, c->name, strerror(errno));
    }
}

/* preStop hooks and SIGTERM, SIGKILL once the grace period is over; the sandbox goes when no
 * container runs any more. The regular containers stop first (their hooks together); the
 * sidecars after them, the last one first, each once the one after it is gone, as the kubelet
 * stops restartable init containers. */
static void terminate(struct kite_pods *p, struct pod *pod, int64_t now) {
    if (!pod->stopping) {
        pod->stopping = true;
        pod->stop_at = now;
        for (size_t i = 0; i < pod->nc; i++) set_wait(&pod->c[i], NULL, NULL);
    }
    bool regular_running = false;
    for (size_t i = 0; i < pod->nc; i++) {
        struct pod_ctr *c = &pod->c[i];
        if (c->sidecar || !ctr_running(c)) continue;
        regular_running = true;
        stop_one(p, pod, c);
    }
    for (size_t i = pod->n_init; !regular_running && i-- > 0;) {
        struct pod_ctr *c = &pod->c[i];
        if (!c->sidecar || !ctr_running(c)) continue;
        stop_one(p, pod, c);
        break; /* one at a time, from the last */
    }
    kite_pods_refresh(p, pod);
    /* the grace as it is now (a DELETE may have shortened it); a pod gone from the API (force
     * deleted) gets at most 1 s more, as the kubelet gives it */
    int64_t grace = pod->in_api ? pod->grace_s : KITE_MIN(pod->grace_s, 1);
    pod->kill_at = kite_sat_add(pod->stop_at, kite_sec_to_ns(grace));
    if (pod->in_api && grace > 0 && pod->kill_floor > pod->kill_at) pod->kill_at = pod->kill_floor;
    bool running = false;
    for (size_t i = 0; i < pod->nc; i++) {
        struct pod_ctr *c = &pod->c[i];
        if (!ctr_running(c)) continue;
        if (now >= pod->kill_at)
            rt_result(p, pod, "stop_container", p->rt->ops->stop_container(p->rt, c->id, 0, KITE_PODS_RT_TIMEOUT_NS));
        running = true;
    }
    if (running) {
        kite_pods_refresh(p, pod);
        running = false;
        for (size_t i = 0; i < pod->nc; i++) running = running || ctr_running(&pod->c[i]);
    }
    if (running) {
        /* a stopped regular container's exit (the PLEG) moves the sidecars' turn on */
        pod->next_sync = now >= pod->kill_at ? now + KITE_NS_PER_SEC : pod->kill_at;
        return;
    }
    if (!pod->killed) {
        if (pod->sandbox_id)
            rt_result(p, pod, "stop_sandbox", p->rt->ops->stop_sandbox(p->rt, pod->sandbox_id, KITE_PODS_RT_TIMEOUT_NS));
        pod->killed = true;
    }
    if (!pod->in_api && !pod->removed) {
        /* the pod is gone from the API: nothing of it stays on the node, its logs included */
        struct kite_sandbox_status sb = {0};
        bool have_sb = pod->sandbox_id &&
                       p->rt->ops->sandbox_status(p->rt, pod->sandbox_id, KITE_PODS_RT_TIMEOUT_NS, &sb) == 0;
        if (pod->old_sandbox_id && p->rt->ops->remove_sandbox(p->rt, pod->old_sandbox_id, KITE_PODS_RT_TIMEOUT_NS) == 0) {
            free(pod->old_sandbox_id);
            pod->old_sandbox_id = NULL;
        }
        if (pod->sandbox_id &&
            p->rt->ops->remove_sandbox(p->rt, pod->sandbox_id, KITE_PODS_RT_TIMEOUT_NS) < 0) {
            if (have_sb) kite_sandbox_status_release(&sb);
            pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
            return;
        }
        if (have_sb && sb.log_dir && *sb.log_dir) kite_rm_rf(sb.log_dir);
        if (have_sb) kite_sandbox_status_release(&sb);
        if (kite_pods_volumes_teardown(p, pod->uid) < 0) {
            pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
            return;
        }
        pod->removed = true;
    }
}

/* A failed liveness/startup probe's SIGTERM went unanswered for the grace period: SIGKILL. */
static void probe_kill_due(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, int64_t now) {
    if (!ctr_running(c) || !c->probe_kill_at) return;
    if (now >= c->probe_kill_at)
        rt_result(p, pod, "stop_container", p->rt->ops->stop_container(p->rt, c->id, 0, KITE_PODS_RT_TIMEOUT_NS));
    else if (!pod->next_sync || pod->next_sync > c->probe_kill_at)
        pod->next_sync = c->probe_kill_at;
}

/* A sidecar (restartable init container) in the init sequence: started (and past its startup
 * probe) before the next one; restarted whenever it exits. True when the sequence goes on. */
static bool sidecar_step(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, int64_t now) {
    probe_kill_due(p, pod, c, now);
    if (!ctr_running(c)) {
        if (!c->id) start_ctr(p, pod, c, now);
        else if (c->have_st && c->st.state == KITE_CONTAINER_EXITED) restart_ctr(p, pod, c, now);
        else if (c->have_st && c->st.state == KITE_CONTAINER_CREATED) {
            char *err = NULL;
            if (rt_result(p, pod, "start_container",
                          p->rt->ops->start_container(p->rt, c->id, KITE_PODS_RT_TIMEOUT_NS, &err)) < 0)
                pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
            free(err);
        }
    }
    if (!c->done && kite_pods_ctr_started(c)) c->done = true;
    return c->done;
}

static void sync_running(struct kite_pods *p, struct pod *pod, int64_t now) {
    if (pod->deleting || !pod->in_api || pod->deadline_exceeded) {
        terminate(p, pod, now);
        return;
    }
    if (pod->rejected || pod->finished || pod->killed) return;
    enum pod_phase ph = kite_pods_compute_phase(pod);
    if (ph == PHASE_SUCCEEDED || ph == PHASE_FAILED) {
        /* the pod is done: its sidecars stop (last first), then its sandbox goes; its
         * containers' records stay */
        terminate(p, pod, now);
        return;
    }
    if (pod->sandbox_id && !sandbox_alive(p, pod, now)) return;
    if (!pod->sandbox_id && pod->old_sandbox_id && strcmp(kite_pods_restart_policy(pod), "Never") == 0) return;
    if (!ensure_sandbox(p, pod, now)) return;
    if (!ensure_volumes(p, pod, now)) return;
    const char *policy = kite_pods_restart_policy(pod);
    for (size_t i = 0; i < pod->n_init; i++) {
        struct pod_ctr *c = &pod->c[i];
        if (c->sidecar) {
            if (!sidecar_step(p, pod, c, now)) return;
            continue;
        }
        if (c->done) continue;
        if (ctr_running(c)) return;
        if (c->have_st && c->st.state == KITE_CONTAINER_EXITED) {
            if (strcmp(policy, "Never") == 0) return; /* the pod failed */
            restart_ctr(p, pod, c, now);
            return;
        }
        start_ctr(p, pod, c, now);
        return;
    }
    for (size_t i = pod->n_init; i < pod->n_main; i++) {
        struct pod_ctr *c = &pod->c[i];
        probe_kill_due(p, pod, c, now);
        if (ctr_running(c)) continue;
        if (!c->id) start_ctr(p, pod, c, now);
        else if (c->have_st && c->st.state == KITE_CONTAINER_EXITED) {
            if (should_restart(policy, c->st.exit_code)) restart_ctr(p, pod, c, now);
        } else if (c->have_st && c->st.state == KITE_CONTAINER_CREATED) {
            char *err = NULL;
            if (rt_result(p, pod, "start_container",
                          p->rt->ops->start_container(p->rt, c->id, KITE_PODS_RT_TIMEOUT_NS, &err)) < 0)
                pod->next_sync = now + KITE_PODS_SYNC_ERROR_NS;
            free(err);
        }
    }
    /* ephemeral containers (kubectl debug): started once, in the running pod, never again */
    for (size_t i = pod->n_main; i < pod->nc; i++) {
        struct pod_ctr *c = &pod->c[i];
        if (!c->id) start_ctr(p, pod, c, now);
    }
    /* the main containers may have just ended the pod (a Job's pod with sidecars) */
    ph = kite_pods_compute_phase(pod);
    if (ph == PHASE_SUCCEEDED || ph == PHASE_FAILED) terminate(p, pod, now);
}

void kite_pods_worker_sync(struct kite_pods *p, struct pod *pod, int64_t now) {
    pod->next_sync = 0;
    /* activeDeadlineSeconds, counted from the pod's startTime as the kubelet's */
    json_object *ad = kite_agent_pj(pod->obj, "spec.activeDeadlineSeconds");
    if (ad && !pod->deadline_exceeded && !pod->finished && !pod->rejected && !pod->killed && pod->in_api &&
        !pod->deleting) {
        int64_t left = kite_sat_add(pod->start_wall, kite_sec_to_ns(json_object_get_int64(ad))) - kite_now_wall(p->clock);
        if (left <= 0) {
            pod->deadline_exceeded = true;
            ev(p, pod, NULL, "Normal", "DeadlineExceeded", "Pod was active on the node longer than the specified deadline");
        }
    }
    sync_running(p, pod, now);
    if (ad && !pod->deadline_exceeded && !pod->killed && !pod->finished) {
        int64_t left = kite_sat_add(pod->start_wall, kite_sec_to_ns(json_object_get_int64(ad))) - kite_now_wall(p->clock);
        int64_t at = now + KITE_MAX(left, 0) + KITE_NS_PER_MS;
        if (!pod->next_sync || at < pod->next_sync) pod->next_sync = at;
    }
}

/* ---- probes ---- */

static int64_t started_mono(struct kite_pods *p, const struct kite_container_status *st) {
    int64_t wall = st->started_ns ? st->started_ns : st->created_ns;
    int64_t ago = kite_now_wall(p->clock) - wall;
    return kite_now_mono(p->clock) - (ago > 0 ? ago : 0);
}

void kite_pods_probes_sync(struct kite_pods *p, struct pod *pod) {
    json_object *hn = kite_agent_pj(pod->obj, "spec.hostNetwork");
    const char *ip = hn && json_object_get_boolean(hn) ? pod->host_ip : pod->sandbox_ip;
    for (size_t i = 0; i < pod->nc; i++) {
        struct pod_ctr *c = &pod->c[i];
        if (!c->id || (c->init && !c->sidecar)) continue;
        if (!ctr_running(c) || pod->stopping) {
            kite_pods_prober_remove(p->prober, c->id, NULL);
            continue;
        }
        for (int k = 0; k < PROBE_KINDS; k++) {
            json_object *spec = kite_agent_pj(c->spec, kite_pods_probe_field((enum probe_kind)k));
            if (spec)
                kite_pods_prober_add(p->prober, pod->uid, c->name, c->id, (enum probe_kind)k, spec, kite_agent_pj(c->spec, "ports"), ip,
                                started_mono(p, &c->st));
        }
    }
}

/* A failed liveness or startup probe: SIGTERM now, SIGKILL after the probe's (or the pod's)
 * grace period; the restart policy then decides, as for any exit. */
static void probe_kill(struct kite_pods *p, struct pod *pod, struct pod_ctr *c, enum probe_kind kind, int64_t now) {
    _cleanup_free_ char *m = kite_asprintf("Container %s failed %s probe, will be restarted", c->name,
                                           kind == PROBE_STARTUP ? "startup" : "liveness");
    ev(p, pod, c, "Normal", "Killing", m);
    json_object *g = kite_agent_pj(kite_agent_pj(c->spec, kite_pods_probe_field(kind)), "terminationGracePeriodSeconds");
    int64_t grace = g ? json_object_get_int64(g) : pod->grace_s;
    if (grace < 0) grace = 0;
    if (strcmp(p->rt->ops->name, "runc") != 0 || c->st.pid <= 0 || grace == 0) {
        rt_result(p, pod, "stop_container",
                  p->rt->ops->stop_container(p->rt, c->id, kite_sec_to_ns(grace), KITE_PODS_RT_TIMEOUT_NS));
        return;
    }
    if (kill(c->st.pid, SIGTERM) < 0 && errno != ESRCH)
        log_warn(PODS_LOG, "pod %s/%s: SIGTERM to %s: %s", pod->ns, pod->name, c->name, strerror(errno));
    c->probe_kill_at = kite_sat_add(now, kite_sec_to_ns(grace));
}

void kite_pods_probe_results(struct kite_pods *p, int64_t now) {
    struct probe_result *fresh = NULL;
    size_t n_fresh = 0;
    kite_pods_prober_take(p->prober, &fresh, &n_fresh);
    /* results held for pods that were with a worker come first */
    struct probe_result *v = p->held_probes;
    size_t n = p->n_held_probes;
    if (n_fresh) {
        v = kite_realloc(v, (n + n_fresh) * sizeof(*v));
        memcpy(v + n, fresh, n_fresh * sizeof(*v));
        n += n_fresh;
    }
    free(fresh);
    p->held_probes = NULL;
    p->n_held_probes = 0;
    for (size_t i = 0; i < n; i++) {
        struct probe_result *r = &v[i];
        struct pod *pod = NULL;
        for (size_t j = 0; j < p->n_pods && !pod; j++)
            if (strcmp(p->pods[j]->uid, r->pod_uid) == 0) pod = p->pods[j];
        if (pod && pod->busy) {
            p->held_probes = kite_realloc(p->held_probes, (p->n_held_probes + 1) * sizeof(*v));
            p->held_probes[p->n_held_probes++] = *r;
            continue;
        }
        struct pod_ctr *c = NULL;
        for (size_t j = 0; pod && j < pod->nc && !c; j++)
            if (kite_streq(pod->c[j].id, r->cid)) c = &pod->c[j];
        if (!c || pod->stopping) { /* a container replaced or stopped meanwhile */
            kite_pods_probe_result_release(r);
            continue;
        }
        if (!r->success) {
            _cleanup_free_ char *m = kite_asprintf("%s probe failed: %s", kite_pods_probe_kind_name(r->kind),
                                                   r->output ? r->output : "");
            ev(p, pod, c, "Warning", "Unhealthy", m);
        }
        if (r->changed) {
            if (r->kind == PROBE_READINESS) c->probe_ready = r->success;
            else if (r->kind == PROBE_STARTUP && r->success) c->probe_started = true;
            else if (!r->success && ctr_running(c)) probe_kill(p, pod, c, r->kind, now);
            pod->dirty = true;
        }
        kite_pods_probe_result_release(r);
    }
    free(v);
}

/* Node admission: the pod's requests must fit allocatable minus what admitted pods request. */
/* The kubelet's safe sysctls (pkg/kubelet/sysctl/safe_sysctls.go of 1.32), each namespaced:
 * allowed to every pod. Others only when --allowed-unsafe-sysctls names them. */
static const struct {
    const char *name;
    bool net; /* else ipc */
} safe_sysctls[] = {
    {"kernel.shm_rmid_forced", false},         {"net.ipv4.ip_local_port_range", true},
    {"net.ipv4.tcp_syncookies", true},         {"net.ipv4.ping_group_range", true},
    {"net.ipv4.ip_unprivileged_port_start", true}, {"net.ipv4.ip_local_reserved_ports", true},
    {"net.ipv4.tcp_keepalive_time", true},     {"net.ipv4.tcp_fin_timeout", true},
    {"net.ipv4.tcp_keepalive_intvl", true},    {"net.ipv4.tcp_keepalive_probes", true},
    {"net.ipv4.tcp_rmem", true},               {"net.ipv4.tcp_wmem", true},
};

/* "net/ipv4/tcp_syncookies" -> "net.ipv4.tcp_syncookies" (a new string), as the kubelet's
 * NormalizeName: a name whose first separator is '/' has its '/' and '.' swapped. */
char *kite_pods_sysctl_normalize(const char *name) {
    char *n = kite_strdup(name);
    size_t i = strcspn(n, "./");
    if (n[i] != '/') return n;
    for (char *q = n; *q; q++) *q = *q == '/' ? '.' : *q == '.' ? '/' : *q;
    return n;
}

int kite_pods_sysctl_namespace(const char *name) {
    if (kite_streq(name, "kernel.sem")) return KITE_SYSCTL_IPC;
    static const char *const ipc[] = {"kernel.shm", "kernel.msg", "fs.mqueue."};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(ipc); i++)
        if (strncmp(name, ipc[i], strlen(ipc[i])) == 0) return KITE_SYSCTL_IPC;
    return strncmp(name, "net.", 4) == 0 ? KITE_SYSCTL_NET : KITE_SYSCTL_UNKNOWN;
}

/* KITE_SYSCTL_PATTERN_RE, at most 253 characters: a name, or a prefix and '*' (net.*) */
bool kite_pods_sysctl_pattern_valid(const char *p) {
    size_t n = strlen(p);
    if (n == 0 || n > 253) return false;
    bool star = p[n - 1] == '*';
    if (star) n--;
    if (star && n > 0 && (p[n - 1] == '.' || p[n - 1] == '/')) n--; /* "net.*": the prefix "net." */
    if (n == 0) return false;
    /* segments separated by '.' or '/', each alphanumeric at both ends with '-' and '_' inside */
    size_t seg = 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = i < n ? p[i] : '.';
        bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
        if (ch == '.' || ch == '/') {
            if (seg == 0 || p[i - 1] == '-' || p[i - 1] == '_') return false;
            seg = 0;
        } else if (alnum || ((ch == '-' || ch == '_') && seg > 0)) {
            seg++;
        } else {
            return false;
        }
    }
    return true;
}

char *kite_pods_sysctl_refusal(const char *allowed, const char *name, bool host_net, bool host_ipc) {
    int ns = KITE_SYSCTL_UNKNOWN;
    for (size_t k = 0; k < KITE_ARRAY_SIZE(safe_sysctls); k++)
        if (strcmp(safe_sysctls[k].name, name) == 0) ns = safe_sysctls[k].net ? KITE_SYSCTL_NET : KITE_SYSCTL_IPC;
    /* the allowed names and NAME* patterns (their namespaces checked when the flag was read) */
    for (const char *a = allowed; ns == KITE_SYSCTL_UNKNOWN && a && *a;) {
        size_t len = strcspn(a, ",");
        bool prefix = len && a[len - 1] == '*';
        size_t cmp = prefix ? len - 1 : len;
        if (prefix ? strncmp(name, a, cmp) == 0 : strlen(name) == cmp && strncmp(name, a, cmp) == 0) {
            _cleanup_free_ char *pat = kite_strndup(a, cmp);
            ns = kite_pods_sysctl_namespace(pat);
        }
        a += len;
        if (*a == ',') a++;
    }
    if (ns == KITE_SYSCTL_UNKNOWN) return kite_asprintf("\"%s\" not allowlisted", name);
    if (ns == KITE_SYSCTL_NET ? host_net : host_ipc)
        return kite_asprintf("\"%s\" not allowed with host %s enabled", name, ns == KITE_SYSCTL_NET ? "net" : "ipc");
    return NULL;
}

/* The pod's sysctls as the kubelet's sysctl admission checks them: NULL, or why not. */
static char *sysctls_forbidden(struct kite_pods *p, struct pod *pod) {
    json_object *v = kite_agent_pj(pod->obj, "spec.securityContext.sysctls");
    bool host_net = json_object_get_boolean(kite_agent_pj(pod->obj, "spec.hostNetwork"));
    bool host_ipc = json_object_get_boolean(kite_agent_pj(pod->obj, "spec.hostIPC"));
    for (size_t i = 0; v && json_object_is_type(v, json_type_array) && i < json_object_array_length(v); i++) {
        _cleanup_free_ char *n = kite_pods_sysctl_normalize(kite_agent_pjs(json_object_array_get_idx(v, i), "name") ?: "");
        _cleanup_free_ char *why = kite_pods_sysctl_refusal(p->unsafe_sysctls, n, host_net, host_ipc);
        if (why) return kite_asprintf("forbidden sysctl: %s", why);
    }
    return NULL;
}

bool kite_pods_apparmor_enabled(const char *file) {
    FILE *f = fopen(file ? file : "/sys/module/apparmor/parameters/enabled", "re");
    if (!f) return false;
    int ch = fgetc(f);
    fclose(f);
    return ch == 'Y';
}

/* a profile other than unconfined: {"type": "RuntimeDefault"|"Localhost"} */
static bool apparmor_confines(json_object *prof) { return prof && !kite_streq(kite_agent_pjs(prof, "type"), "Unconfined"); }

char *kite_pods_apparmor_refusal(json_object *pod, bool enabled) {
    bool required = apparmor_confines(kite_agent_pj(pod, "spec.securityContext.appArmorProfile"));
    static const char *const lists[] = {"spec.initContainers", "spec.containers", "spec.ephemeralContainers"};
    for (size_t l = 0; !required && l < KITE_ARRAY_SIZE(lists); l++) {
        json_object *cs = kite_agent_pj(pod, lists[l]);
        for (size_t i = 0; !required && cs && json_object_is_type(cs, json_type_array) && i < json_object_array_length(cs); i++)
            required = apparmor_confines(kite_agent_pj(json_object_array_get_idx(cs, i), "securityContext.appArmorProfile"));
    }
    json_object *ann = kite_agent_pj(pod, "metadata.annotations");
    if (!required && ann && json_object_is_type(ann, json_type_object)) {
        json_object_object_foreach(ann, k, val) {
            if (strncmp(k, "container.apparmor.security.beta.kubernetes.io/", 47) == 0 &&
                !kite_streq(json_object_get_string(val), "unconfined")) {
                required = true;
                break;
            }
        }
    }
    if (!required) return NULL;
    if (!enabled) return kite_strdup("Cannot enforce AppArmor: AppArmor is not enabled on the host");
    return kite_strdup("Cannot enforce AppArmor: this node agent does not apply AppArmor profiles");
}

void kite_pods_admit(struct kite_pods *p, struct pod *pod) {
    pod->admitted = true;
    char *forbidden = sysctls_forbidden(p, pod);
    if (forbidden) {
        pod->rejected = true;
        pod->reject_reason = kite_strdup("SysctlForbidden");
        pod->reject_message = kite_asprintf("Pod was rejected: %s", forbidden);
        ev(p, pod, NULL, "Warning", pod->reject_reason, forbidden);
        log_info(PODS_LOG, "pod %s/%s rejected: %s", pod->ns, pod->name, forbidden);
        free(forbidden);
        return;
    }
    /* the AppArmor admission, for a pod not yet running (its lifecycle handler's check) */
    char *apparmor = kite_pods_apparmor_refusal(pod->obj, p->apparmor);
    if (apparmor) {
        pod->rejected = true;
        pod->reject_reason = kite_strdup("AppArmor");
        pod->reject_message = kite_asprintf("Pod was rejected: %s", apparmor);
        ev(p, pod, NULL, "Warning", pod->reject_reason, apparmor);
        log_info(PODS_LOG, "pod %s/%s rejected: %s", pod->ns, pod->name, apparmor);
        free(apparmor);
        return;
    }
    if (p->alloc_pods_m < 0 && p->alloc_cpu_m < 0 && p->alloc_mem_m < 0) return;
    struct kite_pod_requests r;
    kite_pod_requests(pod->obj, false, &r);
    int64_t cpu = r.cpu_m, mem = r.mem_m, used_cpu = 0, used_mem = 0, used_pods = 0;
    for (size_t i = 0; i < p->n_pods; i++) {
        struct pod *o = p->pods[i];
        if (o == pod || !kite_pods_holds_resources(o)) continue;
        kite_pod_requests(o->obj, false, &r);
        used_cpu = kite_sat_add(used_cpu, r.cpu_m); /* a huge request fills the node */
        used_mem = kite_sat_add(used_mem, r.mem_m);
        used_pods++;
    }
    const char *res = NULL;
    int64_t req = 0, used = 0, cap = 0;
    if (p->alloc_pods_m >= 0 && (used_pods + 1) * 1000 > p->alloc_pods_m)
        res = "pods", req = 1, used = used_pods, cap = p->alloc_pods_m / 1000;
    else if (p->alloc_cpu_m >= 0 && cpu > 0 && kite_sat_add(used_cpu, cpu) > p->alloc_cpu_m)
        res = "cpu", req = cpu, used = used_cpu, cap = p->alloc_cpu_m;
    else if (p->alloc_mem_m >= 0 && mem > 0 && kite_sat_add(used_mem, mem) > p->alloc_mem_m)
        res = "memory", req = mem / 1000, used = used_mem / 1000, cap = p->alloc_mem_m / 1000;
    if (!res) return;
    pod->rejected = true;
    pod->reject_reason = kite_asprintf("OutOf%s", res);
    _cleanup_free_ char *why = kite_asprintf("Node didn't have enough resource: %s, requested: %lld, used: %lld, "
                                             "capacity: %lld", res, (long long)req, (long long)used, (long long)cap);
    pod->reject_message = kite_asprintf("Pod was rejected: %s", why);
    ev(p, pod, NULL, "Warning", pod->reject_reason, why);
    log_info(PODS_LOG, "pod %s/%s rejected: %s", pod->ns, pod->name, why);
}

void kite_agent_pod_free(struct pod *pod) {
    if (!pod) return;
    for (size_t i = 0; i < pod->nc; i++) {
        struct pod_ctr *c = &pod->c[i];
        free(c->name);
        json_object_put(c->spec);
        free(c->id);
        free(c->prev_id);
        if (c->have_st) kite_container_status_release(&c->st);
        if (c->have_last) kite_container_status_release(&c->last);
        free(c->wait_reason);
        free(c->wait_message);
        free(c->tmsg);
        free(c->tmsg_id);
    }
    free(pod->c);
    free(pod->uid);
    free(pod->ns);
    free(pod->name);
    json_object_put(pod->obj);
    free(pod->sandbox_id);
    free(pod->sandbox_ip);
    free(pod->old_sandbox_id);
    free(pod->host_ip);
    free(pod->reject_reason);
    free(pod->reject_message);
    free(pod->hung_op);
    json_object_put(pod->status);
    json_object_put(pod->acked);
    free(pod);
}
