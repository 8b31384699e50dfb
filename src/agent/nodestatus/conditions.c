/* The condition setters: MemoryPressure, DiskPressure, PIDPressure (the eviction manager's hard
 * thresholds against what the machine has left) and Ready, with the kubelet's exact reasons and
 * messages (pkg/kubelet/nodestatus/setters.go). An observation that cannot be made reports no
 * pressure, as the eviction manager does when a signal is missing. */
#include "agent/nodestatus/internal.h"

#include "base/buf.h"

static void set_pressure(struct ns_ctx *c, const char *type, bool pressure, const char *reason_true,
                         const char *msg_true, const char *reason_false, const char *msg_false,
                         const char *event_true, const char *event_false) {
    kite_ns_set_condition(c, type, pressure ? "True" : "False", pressure ? reason_true : reason_false,
                     pressure ? msg_true : msg_false, event_true, event_false);
}

/* The verdicts are kite_nodestatus_read's (inputs.c): the digest covers exactly them. */
int kite_ns_set_memory_pressure(struct ns_ctx *c) {
    set_pressure(c, "MemoryPressure", c->in->mem_pressure, "KubeletHasInsufficientMemory",
                 "kubelet has insufficient memory available", "KubeletHasSufficientMemory",
                 "kubelet has sufficient memory available", "NodeHasInsufficientMemory",
                 "NodeHasSufficientMemory");
    return 0;
}

int kite_ns_set_disk_pressure(struct ns_ctx *c) {
    set_pressure(c, "DiskPressure", c->in->disk_pressure, "KubeletHasDiskPressure", "kubelet has disk pressure",
                 "KubeletHasNoDiskPressure", "kubelet has no disk pressure", "NodeHasDiskPressure",
                 "NodeHasNoDiskPressure");
    return c->fs_ok ? 0 : -ENODATA;
}

int kite_ns_set_pid_pressure(struct ns_ctx *c) {
    set_pressure(c, "PIDPressure", c->in->pid_pressure, "KubeletHasInsufficientPID",
                 "kubelet has insufficient PID available", "KubeletHasSufficientPID",
                 "kubelet has sufficient PID available", "NodeHasInsufficientPID",
                 "NodeHasSufficientPID");
    return 0;
}

/* Appends one error message to the aggregate, skipping duplicates as errors.NewAggregate's
 * Error() does. */
static void add_error(const char **v, size_t *n, const char *msg) {
    for (size_t i = 0; i < *n; i++)
        if (strcmp(v[i], msg) == 0) return;
    v[(*n)++] = msg;
}

int kite_ns_set_ready(struct ns_ctx *c) {
    const struct kite_ns_sources *src = c->src;
    const char *errs[3];
    size_t n = 0;
    _cleanup_free_ char *pleg = NULL, *missing = NULL;
    /* runtimeState.runtimeErrors(): runtime first, then health checks (PLEG) */
    if (!src->runtime_ready)
        add_error(errs, &n, src->runtime_error && *src->runtime_error ? src->runtime_error
                                                                      : "container runtime is down");
    if (!src->pleg_healthy) {
        pleg = kite_asprintf("PLEG is not healthy: %s", src->pleg_error && *src->pleg_error
                                                           ? src->pleg_error
                                                           : "pleg has yet to be successful");
        add_error(errs, &n, pleg);
    }
    static const char *const required[] = {"cpu", "memory", "pods", "ephemeral-storage"};
    json_object *cap = NULL;
    json_object_object_get_ex(c->status, "capacity", &cap);
    struct kite_buf m = {0};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(required); i++) {
        if (cap && json_object_object_get_ex(cap, required[i], NULL)) continue;
        kite_buf_puts(&m, m.len ? ", " : "Missing node capacity for resources: ");
        kite_buf_puts(&m, required[i]);
    }
    if (m.len) {
        missing = kite_buf_detach(&m, NULL);
        add_error(errs, &n, missing);
    }

    if (n == 0) {
        kite_ns_set_condition(c, "Ready", "True", "KubeletReady", "kubelet is posting ready status",
                         "NodeReady", "NodeNotReady");
        return 0;
    }
    /* errors.NewAggregate: one error prints bare, several as "[a, b]" */
    struct kite_buf msg = {0};
    if (n > 1) kite_buf_putc(&msg, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) kite_buf_puts(&msg, ", ");
        kite_buf_puts(&msg, errs[i]);
    }
    if (n > 1) kite_buf_putc(&msg, ']');
    kite_ns_set_condition(c, "Ready", "False", "KubeletNotReady", msg.p, "NodeReady", "NodeNotReady");
    kite_buf_release(&msg);
    return 0;
}
