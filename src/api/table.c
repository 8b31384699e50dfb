/* Server-side Table printers (kubernetes/pkg/printers/internalversion/printers.go), for the
 * kinds kubectl users look at. kube-apiserver always prints with Wide=true and lets kubectl
 * hide priority-1 columns, so every printer here emits all of its columns. Cells are strings
 * except where upstream uses numbers (Event Count). */
#include "api/table.h"
#include "base/clock.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>

#define NAME_DESC                                                                                              \
    "Name must be unique within a namespace. Is required when creating resources, although some resources " \
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily "  \
    "intended for creation idempotence and configuration definition. Cannot be updated. More info: "          \
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
#define AGE_DESC                                                                                                \
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "  \
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this "      \
    "value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for " \
    "lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"

#define COL_NAME {"Name", "string", "name", NAME_DESC, 0}
#define COL_AGE {"Age", "string", "", AGE_DESC, 0}

/* ---- small JSON readers: absent or mistyped fields read as empty ---- */

/* Follows NULL-terminated keys; NULL when any step is missing. */
static json_object *at(json_object *o, ...) {
    va_list ap;
    va_start(ap, o);
    for (const char *k; o && (k = va_arg(ap, const char *));) {
        json_object *n = NULL;
        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &n)) n = NULL;
        o = n;
    }
    va_end(ap);
    return o;
}
static const char *str_of(json_object *o) {
    return o && json_object_is_type(o, json_type_string) ? json_object_get_string(o) : "";
}
#define STR(o, ...) str_of(at(o, __VA_ARGS__, (const char *)NULL))
#define OBJ(o, ...) at(o, __VA_ARGS__, (const char *)NULL)
static size_t arr_len(json_object *a) {
    return a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}
static int64_t int_of(json_object *o) {
    return o && (json_object_is_type(o, json_type_int) || json_object_is_type(o, json_type_double)) ? json_object_get_int64(o) : 0;
}

static void add_str(json_object *cells, const char *s) { json_object_array_add(cells, json_object_new_string(s)); }
static void add_or(json_object *cells, const char *s, const char *dflt) { add_str(cells, *s ? s : dflt); }

void kite_human_duration(int64_t seconds, char out[32]) {
    if (seconds < -1) {
        strcpy(out, "<invalid>");
        return;
    }
    if (seconds < 0) seconds = 0;
    if (seconds < 60 * 2) {
        snprintf(out, 32, "%llds", (long long)seconds);
        return;
    }
    int64_t minutes = seconds / 60;
    if (minutes < 10) {
        int64_t s = seconds % 60;
        if (s == 0)
            snprintf(out, 32, "%lldm", (long long)minutes);
        else
            snprintf(out, 32, "%lldm%llds", (long long)minutes, (long long)s);
        return;
    }
    if (minutes < 60 * 3) {
        snprintf(out, 32, "%lldm", (long long)minutes);
        return;
    }
    int64_t hours = seconds / 3600;
    if (hours < 8) {
        int64_t m = minutes % 60;
        if (m == 0)
            snprintf(out, 32, "%lldh", (long long)hours);
        else
            snprintf(out, 32, "%lldh%lldm", (long long)hours, (long long)m);
    } else if (hours < 48) {
        snprintf(out, 32, "%lldh", (long long)hours);
    } else if (hours < 24 * 8) {
        int64_t h = hours % 24;
        if (h == 0)
            snprintf(out, 32, "%lldd", (long long)(hours / 24));
        else
            snprintf(out, 32, "%lldd%lldh", (long long)(hours / 24), (long long)h);
    } else if (hours < 24 * 365 * 2) {
        snprintf(out, 32, "%lldd", (long long)(hours / 24));
    } else if (hours < 24 * 365 * 8) {
        int64_t dy = (hours / 24) % 365;
        if (dy == 0)
            snprintf(out, 32, "%lldy", (long long)(hours / 24 / 365));
        else
            snprintf(out, 32, "%lldy%lldd", (long long)(hours / 24 / 365), (long long)dy);
    } else {
        snprintf(out, 32, "%lldy", (long long)(hours / 24 / 365));
    }
}

/* HumanDuration(now - t); Go truncates the duration's seconds toward zero. */
static void since_ns(int64_t t_ns, int64_t now_s, char out[32]) {
    kite_human_duration((now_s * KITE_NS_PER_SEC - t_ns) / KITE_NS_PER_SEC, out);
}

/* translateTimestampSince: "<unknown>" for a missing/unparsable time. */
static void since(const char *ts, int64_t now_s, char out[32]) {
    int64_t ns;
    if (!*ts || kite_time_parse(ts, &ns) < 0) {
        strcpy(out, "<unknown>");
        return;
    }
    since_ns(ns, now_s, out);
}

static void add_age(json_object *cells, json_object *obj, int64_t now_s) {
    char age[32];
    since(STR(obj, "metadata", "creationTimestamp"), now_s, age);
    add_str(cells, age);
}

static void add_name(json_object *cells, json_object *obj) { add_str(cells, STR(obj, "metadata", "name")); }

/* ---- default ---- */

static const struct kite_table_column default_cols[] = {COL_NAME, COL_AGE};
static void default_cells(json_object *obj, int64_t now_s, json_object *cells) {
    add_name(cells, obj);
    add_age(cells, obj, now_s);
}

/* ---- Node ---- */

static const struct kite_table_column node_cols[] = {
    COL_NAME,
    {"Status", "string", "", "The status of the node", 0},
    {"Roles", "string", "", "The roles of the node", 0},
    COL_AGE,
    {"Version", "string", "", "Kubelet Version reported by the node.", 0},
    {"Internal-IP", "string", "", "List of addresses reachable to the node.", 1},
    {"External-IP", "string", "", "List of addresses reachable to the node.", 1},
    {"OS-Image", "string", "", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1},
    {"Kernel-Version", "string", "", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1},
    {"Container-Runtime", "string", "",
     "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).", 1},
};

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void node_roles(json_object *labels, struct kite_buf *out) {
    static const char prefix[] = "node-role.kubernetes.io/";
    size_t n = 0, cap = 0;
    const char **roles = NULL;
    if (labels && json_object_is_type(labels, json_type_object)) {
        json_object_object_foreach(labels, k, v) {
            const char *role = NULL;
            if (kite_startswith(k, prefix) && k[sizeof(prefix) - 1])
                role = k + sizeof(prefix) - 1;
            else if (strcmp(k, "kubernetes.io/role") == 0 && *str_of(v))
                role = str_of(v);
            if (!role) continue;
            if (n == cap) roles = kite_realloc(roles, (cap = cap ? cap * 2 : 4) * sizeof(*roles));
            roles[n++] = role;
        }
    }
    if (n > 1) qsort(roles, n, sizeof(*roles), cmp_cstr);
    for (size_t i = 0; i < n; i++) {
        if (i && strcmp(roles[i], roles[i - 1]) == 0) continue; /* a set: dedup */
        if (out->len) kite_buf_putc(out, ',');
        kite_buf_puts(out, roles[i]);
    }
    free(roles);
}

static const char *node_address(json_object *obj, const char *type) {
    json_object *addrs = OBJ(obj, "status", "addresses");
    for (size_t i = 0; i < arr_len(addrs); i++) {
        json_object *a = json_object_array_get_idx(addrs, i);
        if (strcmp(STR(a, "type"), type) == 0) return STR(a, "address");
    }
    return "";
}

static void node_cells(json_object *obj, int64_t now_s, json_object *cells) {
    struct kite_buf b = {0};
    add_name(cells, obj);

    json_object *conds = OBJ(obj, "status", "conditions");
    const char *ready = NULL;
    for (size_t i = 0; i < arr_len(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(STR(c, "type"), "Ready") == 0) ready = STR(c, "status"); /* the last one wins, as in a Go map */
    }
    kite_buf_puts(&b, !ready ? "Unknown" : strcmp(ready, "True") == 0 ? "Ready" : "NotReady");
    json_object *unsched = OBJ(obj, "spec", "unschedulable");
    if (unsched && json_object_is_type(unsched, json_type_boolean) && json_object_get_boolean(unsched))
        kite_buf_puts(&b, ",SchedulingDisabled");
    add_str(cells, b.p);

    kite_buf_reset(&b);
    node_roles(OBJ(obj, "metadata", "labels"), &b);
    add_str(cells, b.len ? b.p : "<none>");
    kite_buf_release(&b);

    add_age(cells, obj, now_s);
    add_str(cells, STR(obj, "status", "nodeInfo", "kubeletVersion"));
    add_or(cells, node_address(obj, "InternalIP"), "<none>");
    add_or(cells, node_address(obj, "ExternalIP"), "<none>");
    add_or(cells, STR(obj, "status", "nodeInfo", "osImage"), "<unknown>");
    add_or(cells, STR(obj, "status", "nodeInfo", "kernelVersion"), "<unknown>");
    add_or(cells, STR(obj, "status", "nodeInfo", "containerRuntimeVersion"), "<unknown>");
}

/* ---- Namespace ---- */

static const struct kite_table_column namespace_cols[] = {
    COL_NAME,
    {"Status", "string", "", "The status of the namespace", 0},
    COL_AGE,
};
static void namespace_cells(json_object *obj, int64_t now_s, json_object *cells) {
    add_name(cells, obj);
    add_str(cells, STR(obj, "status", "phase"));
    add_age(cells, obj, now_s);
}

/* ---- Lease ---- */

static const struct kite_table_column lease_cols[] = {
    COL_NAME,
    {"Holder", "string", "",
     "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is "
     "used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
     0},
    COL_AGE,
};
static void lease_cells(json_object *obj, int64_t now_s, json_object *cells) {
    add_name(cells, obj);
    add_str(cells, STR(obj, "spec", "holderIdentity"));
    add_age(cells, obj, now_s);
}

/* ---- Event (core/v1 and events.k8s.io/v1 shapes) ---- */

static const struct kite_table_column event_cols[] = {
    {"Last Seen", "string", "", "The time at which the most recent occurrence of this event was recorded.", 0},
    {"Type", "string", "", "Type of this event (Normal, Warning), new types could be added in the future", 0},
    {"Reason", "string", "",
     "This should be a short, machine understandable string that gives the reason for the transition into the "
     "object's current status.",
     0},
    {"Object", "string", "", "The object that this event is about.", 0},
    {"Subobject", "string", "", "The subobject that this event is about.", 1},
    {"Source", "string", "", "The component reporting this event. Should be a short machine understandable string.", 1},
    {"Message", "string", "", "A human-readable description of the status of this operation.", 0},
    {"First Seen", "string", "", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1},
    {"Count", "string", "", "The number of times this event has occurred.", 1},
    {"Name", "string", "name", NAME_DESC, 1},
};

static const char *first_non_empty(const char *a, const char *b) { return *a ? a : b; }

static void event_cells(json_object *obj, int64_t now_s, json_object *cells) {
    /* events.k8s.io/v1 renames the core fields; the apiserver prints both via one internal type. */
    bool v1events = OBJ(obj, "regarding") || OBJ(obj, "note") || OBJ(obj, "deprecatedSource");
    json_object *inv = v1events ? OBJ(obj, "regarding") : OBJ(obj, "involvedObject");
    const char *first_ts = STR(obj, v1events ? "deprecatedFirstTimestamp" : "firstTimestamp");
    const char *last_ts = STR(obj, v1events ? "deprecatedLastTimestamp" : "lastTimestamp");
    json_object *src = OBJ(obj, v1events ? "deprecatedSource" : "source");
    const char *message = STR(obj, v1events ? "note" : "message");
    int64_t count = int_of(OBJ(obj, v1events ? "deprecatedCount" : "count"));

    char first[32], last[32];
    since(*first_ts ? first_ts : STR(obj, "eventTime"), now_s, first);
    if (*last_ts)
        since(last_ts, now_s, last);
    else
        memcpy(last, first, sizeof(last));
    json_object *series = OBJ(obj, "series");
    if (series && json_object_is_type(series, json_type_object)) {
        since(STR(series, "lastObservedTime"), now_s, last);
        count = int_of(OBJ(series, "count"));
    } else if (count == 0) {
        count = 1; /* singleton events of the new API carry no count */
    }

    struct kite_buf b = {0};
    for (const char *k = STR(inv, "kind"); *k; k++) kite_buf_putc(&b, (char)tolower((unsigned char)*k));
    if (*STR(inv, "name")) kite_buf_printf(&b, "/%s", STR(inv, "name"));
    if (!b.p) kite_buf_puts(&b, "");

    add_str(cells, last);
    add_str(cells, STR(obj, "type"));
    add_str(cells, STR(obj, "reason"));
    add_str(cells, b.p);
    add_str(cells, STR(inv, "fieldPath"));

    kite_buf_reset(&b);
    /* core/v1 spells the reporting controller "reportingComponent" on the wire. */
    const char *component =
        first_non_empty(STR(src, "component"), STR(obj, v1events ? "reportingController" : "reportingComponent"));
    const char *host = first_non_empty(STR(src, "host"), STR(obj, "reportingInstance"));
    kite_buf_puts(&b, component);
    if (*host) kite_buf_printf(&b, ", %s", host);
    add_str(cells, b.p);

    /* strings.TrimSpace */
    size_t mlen = strlen(message);
    while (mlen && isspace((unsigned char)message[mlen - 1])) mlen--;
    while (mlen && isspace((unsigned char)*message)) message++, mlen--;
    json_object_array_add(cells, json_object_new_string_len(message, (int)mlen));

    add_str(cells, first);
    json_object_array_add(cells, json_object_new_int64(count));
    add_name(cells, obj);
    kite_buf_release(&b);
}

/* ---- Pod ---- */

static const struct kite_table_column pod_cols[] = {
    COL_NAME,
    {"Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0},
    {"Status", "string", "", "The aggregate status of the containers in this pod.", 0},
    {"Restarts", "string", "",
     "The number of times the containers in this pod have been restarted and when the last container in this pod "
     "has restarted.",
     0},
    COL_AGE,
    {"IP", "string", "", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1},
    {"Node", "string", "",
     "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply "
     "schedules this pod onto that node, assuming that it fits resource requirements.",
     1},
    {"Nominated Node", "string", "",
     "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot schedule right "
     "away as preemption victims receive their graceful termination periods. This field does not guarantee that "
     "the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes "
     "become available sooner. Scheduler may also decide to give the resources on this node to a higher priority "
     "pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when "
     "the pod is scheduled.",
     1},
    {"Readiness Gates", "string", "",
     "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its "
     "containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" "
     "More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
     1},
};

static bool pod_condition_true(json_object *obj, const char *type) {
    json_object *conds = OBJ(obj, "status", "conditions");
    for (size_t i = 0; i < arr_len(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(STR(c, "type"), type) == 0) return strcmp(STR(c, "status"), "True") == 0;
    }
    return false;
}

static json_object *spec_init_container(json_object *obj, const char *name) {
    json_object *ics = OBJ(obj, "spec", "initContainers");
    for (size_t i = 0; i < arr_len(ics); i++) {
        json_object *c = json_object_array_get_idx(ics, i);
        if (strcmp(STR(c, "name"), name) == 0) return c;
    }
    return NULL;
}
static bool restartable(json_object *spec_container) {
    return spec_container && strcmp(STR(spec_container, "restartPolicy"), "Always") == 0;
}
static bool is_true(json_object *o) { return o && json_object_is_type(o, json_type_boolean) && json_object_get_boolean(o); }

/* Latest of *latest and the container's lastState.terminated.finishedAt (RFC 3339 strings
 * of one format compare in time order only after parsing). */
static void track_restart(json_object *cs, int64_t *latest_ns) {
    const char *t = STR(cs, "lastState", "terminated", "finishedAt");
    int64_t ns;
    if (*t && kite_time_parse(t, &ns) == 0 && ns > *latest_ns) *latest_ns = ns;
}

/* A terminated state with no reason reads "Signal:N" or "ExitCode:N" (prefix "Init:" for init). */
static void terminated_reason(json_object *term, const char *prefix, struct kite_buf *reason) {
    kite_buf_reset(reason);
    if (*STR(term, "reason"))
        kite_buf_printf(reason, "%s%s", prefix, STR(term, "reason"));
    else if (int_of(OBJ(term, "signal")))
        kite_buf_printf(reason, "%sSignal:%lld", prefix, (long long)int_of(OBJ(term, "signal")));
    else
        kite_buf_printf(reason, "%sExitCode:%lld", prefix, (long long)int_of(OBJ(term, "exitCode")));
}

static void pod_cells(json_object *obj, int64_t now_s, json_object *cells) {
    struct kite_buf reason = {0};
    int64_t restarts = 0, init_restarts = 0, ready = 0;
    int64_t last_restart = INT64_MIN, last_init_restart = INT64_MIN;
    json_object *init_specs = OBJ(obj, "spec", "initContainers");
    size_t n_init = arr_len(init_specs);
    int64_t total = (int64_t)arr_len(OBJ(obj, "spec", "containers"));
    for (size_t i = 0; i < n_init; i++)
        if (restartable(json_object_array_get_idx(init_specs, i))) total++;

    const char *phase = STR(obj, "status", "phase");
    kite_buf_puts(&reason, *STR(obj, "status", "reason") ? STR(obj, "status", "reason") : phase);
    json_object *conds = OBJ(obj, "status", "conditions");
    for (size_t i = 0; i < arr_len(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        if (strcmp(STR(c, "type"), "PodScheduled") == 0 && strcmp(STR(c, "reason"), "SchedulingGated") == 0) {
            kite_buf_reset(&reason);
            kite_buf_puts(&reason, "SchedulingGated");
        }
    }

    bool initializing = false;
    json_object *ics = OBJ(obj, "status", "initContainerStatuses");
    for (size_t i = 0; i < arr_len(ics); i++) {
        json_object *cs = json_object_array_get_idx(ics, i);
        restarts += int_of(OBJ(cs, "restartCount"));
        track_restart(cs, &last_restart);
        bool sidecar = restartable(spec_init_container(obj, STR(cs, "name")));
        if (sidecar) {
            init_restarts += int_of(OBJ(cs, "restartCount"));
            track_restart(cs, &last_init_restart);
        }
        json_object *term = OBJ(cs, "state", "terminated");
        const char *waiting = STR(cs, "state", "waiting", "reason");
        if (term && int_of(OBJ(term, "exitCode")) == 0) continue;
        if (sidecar && is_true(OBJ(cs, "started"))) {
            if (is_true(OBJ(cs, "ready"))) ready++;
            continue;
        }
        if (term) {
            terminated_reason(term, "Init:", &reason);
        } else if (*waiting && strcmp(waiting, "PodInitializing") != 0) {
            kite_buf_reset(&reason);
            kite_buf_printf(&reason, "Init:%s", waiting);
        } else {
            kite_buf_reset(&reason);
            kite_buf_printf(&reason, "Init:%zu/%zu", i, n_init);
        }
        initializing = true;
        break;
    }

    if (!initializing || pod_condition_true(obj, "Initialized")) {
        restarts = init_restarts;
        last_restart = last_init_restart;
        bool has_running = false;
        json_object *css = OBJ(obj, "status", "containerStatuses");
        for (size_t i = arr_len(css); i-- > 0;) {
            json_object *cs = json_object_array_get_idx(css, i);
            restarts += int_of(OBJ(cs, "restartCount"));
            track_restart(cs, &last_restart);
            json_object *term = OBJ(cs, "state", "terminated");
            const char *waiting = STR(cs, "state", "waiting", "reason");
            if (*waiting) {
                kite_buf_reset(&reason);
                kite_buf_puts(&reason, waiting);
            } else if (term) {
                terminated_reason(term, "", &reason);
            } else if (is_true(OBJ(cs, "ready")) && OBJ(cs, "state", "running")) {
                has_running = true;
                ready++;
            }
        }
        if (strcmp(reason.p, "Completed") == 0 && has_running) {
            kite_buf_reset(&reason);
            kite_buf_puts(&reason, pod_condition_true(obj, "Ready") ? "Running" : "NotReady");
        }
    }

    bool deleting = *STR(obj, "metadata", "deletionTimestamp") != 0;
    if (deleting && strcmp(STR(obj, "status", "reason"), "NodeLost") == 0) {
        kite_buf_reset(&reason);
        kite_buf_puts(&reason, "Unknown");
    } else if (deleting && strcmp(phase, "Succeeded") != 0 && strcmp(phase, "Failed") != 0) {
        kite_buf_reset(&reason);
        kite_buf_puts(&reason, "Terminating");
    }

    char buf[96];
    add_name(cells, obj);
    snprintf(buf, sizeof(buf), "%lld/%lld", (long long)ready, (long long)total);
    add_str(cells, buf);
    add_str(cells, reason.p);
    if (restarts != 0 && last_restart != INT64_MIN) {
        char ago[32];
        since_ns(last_restart, now_s, ago);
        snprintf(buf, sizeof(buf), "%lld (%s ago)", (long long)restarts, ago);
    } else {
        snprintf(buf, sizeof(buf), "%lld", (long long)restarts);
    }
    add_str(cells, buf);
    add_age(cells, obj, now_s);

    json_object *ips = OBJ(obj, "status", "podIPs");
    const char *ip = arr_len(ips) ? STR(json_object_array_get_idx(ips, 0), "ip") : STR(obj, "status", "podIP");
    add_or(cells, ip, "<none>");
    add_or(cells, STR(obj, "spec", "nodeName"), "<none>");
    add_or(cells, STR(obj, "status", "nominatedNodeName"), "<none>");
    json_object *gates = OBJ(obj, "spec", "readinessGates");
    if (arr_len(gates)) {
        size_t ok = 0;
        for (size_t i = 0; i < arr_len(gates); i++)
            if (pod_condition_true(obj, STR(json_object_array_get_idx(gates, i), "conditionType"))) ok++;
        snprintf(buf, sizeof(buf), "%zu/%zu", ok, arr_len(gates));
        add_str(cells, buf);
    } else {
        add_str(cells, "<none>");
    }
    kite_buf_release(&reason);
}

/* ---- EndpointSlice ---- */

static const struct kite_table_column endpointslice_cols[] = {
    COL_NAME,
    {"AddressType", "string", "",
     "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must "
     "be the same type. This field is immutable after creation. The following address types are currently "
     "supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a "
     "Fully Qualified Domain Name.",
     0},
    {"Ports", "string", "",
     "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a "
     "unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with "
     "a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.",
     0},
    {"Endpoints", "string", "",
     "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.", 0},
    COL_AGE,
};

/* listWithMoreString: the first LIST_MAX items, then " + N more...", or "<unset>". */
#define LIST_MAX 3
struct short_list {
    struct kite_buf b;
    size_t count;
};
static void short_list_add(struct short_list *l, const char *item) {
    if (l->count < LIST_MAX) {
        if (l->count) kite_buf_putc(&l->b, ',');
        kite_buf_puts(&l->b, item);
    }
    l->count++;
}
static void short_list_emit(struct short_list *l, json_object *cells) {
    if (l->count > LIST_MAX)
        kite_buf_printf(&l->b, " + %zu more...", l->count - LIST_MAX);
    else if (!l->b.len)
        kite_buf_puts(&l->b, "<unset>");
    add_str(cells, l->b.p);
    kite_buf_release(&l->b);
}

static void endpointslice_cells(json_object *obj, int64_t now_s, json_object *cells) {
    add_name(cells, obj);
    add_str(cells, STR(obj, "addressType"));

    struct short_list ports = {0};
    json_object *pa = OBJ(obj, "ports");
    for (size_t i = 0; i < arr_len(pa); i++) {
        json_object *p = json_object_array_get_idx(pa, i);
        json_object *port = OBJ(p, "port");
        char num[24];
        if (port && json_object_is_type(port, json_type_int)) {
            snprintf(num, sizeof(num), "%lld", (long long)json_object_get_int64(port));
            short_list_add(&ports, num);
        } else {
            short_list_add(&ports, OBJ(p, "name") ? STR(p, "name") : "*");
        }
    }
    short_list_emit(&ports, cells);

    struct short_list eps = {0};
    json_object *ea = OBJ(obj, "endpoints");
    for (size_t i = 0; i < arr_len(ea); i++) {
        json_object *addrs = OBJ(json_object_array_get_idx(ea, i), "addresses");
        for (size_t j = 0; j < arr_len(addrs); j++) short_list_add(&eps, str_of(json_object_array_get_idx(addrs, j)));
    }
    short_list_emit(&eps, cells);
    add_age(cells, obj, now_s);
}

/* ---- lookup ---- */

#define PRINTER(cols, fn) {cols, KITE_ARRAY_SIZE(cols), fn}
static const struct kite_table_printer default_printer = PRINTER(default_cols, default_cells);
static const struct {
    const char *kind;
    struct kite_table_printer p;
} printers[] = {
    {"Node", PRINTER(node_cols, node_cells)},
    {"Namespace", PRINTER(namespace_cols, namespace_cells)},
    {"Lease", PRINTER(lease_cols, lease_cells)},
    {"Event", PRINTER(event_cols, event_cells)},
    {"Pod", PRINTER(pod_cols, pod_cells)},
    {"EndpointSlice", PRINTER(endpointslice_cols, endpointslice_cells)},
};

const struct kite_table_printer *kite_table_printer_for(const char *kind) {
    for (size_t i = 0; kind && i < KITE_ARRAY_SIZE(printers); i++)
        if (strcmp(printers[i].kind, kind) == 0) return &printers[i].p;
    return NULL;
}

const struct kite_table_printer *kite_table_printer_default(void) { return &default_printer; }

void kite_table_columns_json(const struct kite_table_printer *p, struct kite_buf *buf) {
    kite_buf_putc(buf, '[');
    for (size_t i = 0; i < p->n_columns; i++) {
        const struct kite_table_column *c = &p->columns[i];
        kite_buf_puts(buf, i ? ",{\"name\":" : "{\"name\":");
        kite_buf_json_str(buf, c->name);
        kite_buf_puts(buf, ",\"type\":");
        kite_buf_json_str(buf, c->type);
        kite_buf_puts(buf, ",\"format\":");
        kite_buf_json_str(buf, c->format ? c->format : "");
        kite_buf_puts(buf, ",\"description\":");
        kite_buf_json_str(buf, c->description ? c->description : "");
        kite_buf_printf(buf, ",\"priority\":%d}", c->priority);
    }
    kite_buf_putc(buf, ']');
}
