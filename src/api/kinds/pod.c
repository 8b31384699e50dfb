/* Pod (core/v1). */
#include "api/kinds/kind.h"

/* ---- core/v1 Pod ----------------------------------------------------------------------------- */
STRUCT(container_port, "ContainerPort", F(1, "name", S), F(2, "hostPort", I32), FK(3, "containerPort", I32), F(4, "protocol", S),
    F(5, "hostIP", S));
LIST(container_ports, NULL, container_port);
STRUCT(env_var, "EnvVar", FK(1, "name", S), F(2, "value", S), F(3, "valueFrom", RAW));
LIST(env_vars, NULL, env_var);
STRUCT(resources, "ResourceRequirements", F(1, "limits", RLIST), F(2, "requests", RLIST), F(3, "claims", RAW));
STRUCT(volume_mount, "VolumeMount", FK(1, "name", S), F(2, "readOnly", B), FK(7, "recursiveReadOnly", S), FK(3, "mountPath", S),
    F(4, "subPath", S), FK(5, "mountPropagation", S), F(6, "subPathExpr", S));
LIST(volume_mounts, NULL, volume_mount);
STRUCT(container, "Container", FK(1, "name", S), F(2, "image", S), F(3, "command", SLIST), F(4, "args", SLIST),
    F(5, "workingDir", S), F(6, "ports", container_ports), F(19, "envFrom", RAW), F(7, "env", env_vars),
    F(8, "resources", resources), F(23, "resizePolicy", RAW), FK(24, "restartPolicy", S), F(9, "volumeMounts", volume_mounts),
    F(21, "volumeDevices", RAW), F(10, "livenessProbe", RAW), F(11, "readinessProbe", RAW), F(22, "startupProbe", RAW),
    F(12, "lifecycle", RAW), F(13, "terminationMessagePath", S), F(20, "terminationMessagePolicy", S),
    F(14, "imagePullPolicy", S), F(15, "securityContext", RAW), F(16, "stdin", B), F(17, "stdinOnce", B), F(18, "tty", B));
LIST(containers, NULL, container);
STRUCT(volume, "Volume", FK(1, "name", S));
LIST(volumes, NULL, volume);
STRUCT(local_ref, "LocalObjectReference", F(1, "name", S));
LIST(local_refs, NULL, local_ref);
STRUCT(toleration, "Toleration", F(1, "key", S), F(2, "operator", S), F(3, "value", S), F(4, "effect", S),
    FK(5, "tolerationSeconds", I64));
LIST(tolerations, NULL, toleration);
STRUCT(host_alias, "HostAlias", FK(1, "ip", S), F(2, "hostnames", SLIST));
LIST(host_aliases, NULL, host_alias);
STRUCT(pod_spec, "PodSpec", F(1, "volumes", volumes), F(20, "initContainers", containers), F(2, "containers", containers),
    F(34, "ephemeralContainers", RAW), F(3, "restartPolicy", S), FK(4, "terminationGracePeriodSeconds", I64),
    FK(5, "activeDeadlineSeconds", I64), F(6, "dnsPolicy", S), F(7, "nodeSelector", SMAP), F(8, "serviceAccountName", S),
    F(9, "serviceAccount", S), FK(21, "automountServiceAccountToken", B), F(10, "nodeName", S), F(11, "hostNetwork", B),
    F(12, "hostPID", B), F(13, "hostIPC", B), FK(27, "shareProcessNamespace", B), F(14, "securityContext", RAW),
    F(15, "imagePullSecrets", local_refs), F(16, "hostname", S), F(17, "subdomain", S), F(18, "affinity", RAW),
    F(19, "schedulerName", S), F(22, "tolerations", tolerations), F(23, "hostAliases", host_aliases),
    F(24, "priorityClassName", S), FK(25, "priority", I32), F(26, "dnsConfig", RAW), F(28, "readinessGates", RAW),
    FK(29, "runtimeClassName", S), FK(30, "enableServiceLinks", B), FK(31, "preemptionPolicy", S), F(32, "overhead", RLIST),
    F(33, "topologySpreadConstraints", RAW), FK(35, "setHostnameAsFQDN", B), F(36, "os", RAW), FK(37, "hostUsers", B),
    F(38, "schedulingGates", RAW), F(39, "resourceClaims", RAW));
STRUCT(pod_condition, "PodCondition", FK(1, "type", S), FK(2, "status", S), F(3, "lastProbeTime", T),
    F(4, "lastTransitionTime", T), F(5, "reason", S), F(6, "message", S));
LIST(pod_conditions, NULL, pod_condition);
STRUCT(pod_ip_schema, "PodIP", FK(1, "ip", S));
LIST(pod_ips, NULL, pod_ip_schema);
STRUCT(host_ip, "HostIP", FK(1, "ip", S));
LIST(host_ips, NULL, host_ip);
STRUCT(state_waiting, "ContainerStateWaiting", F(1, "reason", S), F(2, "message", S));
STRUCT(state_running, "ContainerStateRunning", F(1, "startedAt", T));
STRUCT(state_terminated, "ContainerStateTerminated", FK(1, "exitCode", I32), F(2, "signal", I32), F(3, "reason", S),
    F(4, "message", S), F(5, "startedAt", T), F(6, "finishedAt", T), F(7, "containerID", S));
STRUCT(container_state, "ContainerState", F(1, "waiting", state_waiting), F(2, "running", state_running),
    F(3, "terminated", state_terminated));
STRUCT(container_status, "ContainerStatus", FK(1, "name", S), F(2, "state", container_state),
    F(3, "lastState", container_state), FK(4, "ready", B), FK(5, "restartCount", I32), FK(6, "image", S), FK(7, "imageID", S),
    F(8, "containerID", S), FK(9, "started", B), F(10, "allocatedResources", RLIST), F(11, "resources", resources));
LIST(container_statuses, NULL, container_status);
STRUCT(pod_status_schema, "PodStatus", F(1, "phase", S), F(2, "conditions", pod_conditions), F(3, "message", S), F(4, "reason", S),
    F(11, "nominatedNodeName", S), F(5, "hostIP", S), F(16, "hostIPs", host_ips), F(6, "podIP", S), F(12, "podIPs", pod_ips),
    F(7, "startTime", T), F(10, "initContainerStatuses", container_statuses), F(8, "containerStatuses", container_statuses),
    F(9, "qosClass", S), F(13, "ephemeralContainerStatuses", container_statuses), F(14, "resize", S));
ROOT(kite_schema_pod, "Pod", TYPE_META, F(2, "spec", pod_spec), F(3, "status", pod_status_schema));

static const struct kite_smp_rule rules[] = {
    META_RULES,
    {"spec.containers", "name", KITE_SMP_MERGE},
    {"spec.containers.ports", "containerPort", KITE_SMP_MERGE},
    {"spec.containers.env", "name", KITE_SMP_MERGE},
    {"spec.containers.volumeMounts", "mountPath", KITE_SMP_MERGE},
    {"spec.containers.volumeDevices", "devicePath", KITE_SMP_MERGE},
    {"spec.initContainers", "name", KITE_SMP_MERGE},
    {"spec.initContainers.ports", "containerPort", KITE_SMP_MERGE},
    {"spec.initContainers.env", "name", KITE_SMP_MERGE},
    {"spec.initContainers.volumeMounts", "mountPath", KITE_SMP_MERGE},
    {"spec.ephemeralContainers", "name", KITE_SMP_MERGE},
    {"spec.volumes", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS},
    {"spec.imagePullSecrets", "name", KITE_SMP_MERGE},
    {"spec.hostAliases", "ip", KITE_SMP_MERGE},
    {"spec.topologySpreadConstraints", "topologyKey", KITE_SMP_MERGE},
    {"spec.resourceClaims", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS},
    {"status.conditions", "type", KITE_SMP_MERGE},
    {"status.podIPs", "ip", KITE_SMP_MERGE},
    {"status.hostIPs", "ip", KITE_SMP_MERGE},
};
static const struct kite_smp_schema smp = {rules, KITE_ARRAY_SIZE(rules)};

static const char *const fields[] = {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                                         "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                                         "status.podIP", "status.nominatedNodeName", NULL};

static void pod_defaults(json_object *obj) {
    json_object *spec = kite_obj_ensure(obj, "spec");
    if (!kite_obj_get(spec, "restartPolicy")) kite_obj_set(spec, "restartPolicy", json_object_new_string("Always"));
    if (!kite_obj_get(spec, "terminationGracePeriodSeconds")) kite_obj_set(spec, "terminationGracePeriodSeconds", json_object_new_int(30));
    if (!kite_obj_get(spec, "dnsPolicy")) kite_obj_set(spec, "dnsPolicy", json_object_new_string("ClusterFirst"));
    if (!kite_obj_get(spec, "schedulerName")) kite_obj_set(spec, "schedulerName", json_object_new_string("default-scheduler"));
    json_object *status = kite_obj_ensure(obj, "status");
    if (!kite_obj_get(status, "phase")) kite_obj_set(status, "phase", json_object_new_string("Pending"));
}

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

/* The Ready, Status and Restarts cells come out of one walk over the container statuses
 * (printPod). */
struct pod_row {
    struct kite_buf reason;
    int64_t ready, total, restarts, last_restart;
};

static void pod_prepare(const struct kite_table_row *r) {
    struct pod_row *row = r->scratch;
    json_object *obj = r->obj;
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

    *row = (struct pod_row){reason, ready, total, restarts, last_restart};
}

static void pod_release(void *scratch) { kite_buf_release(&((struct pod_row *)scratch)->reason); }

static json_object *pod_ready(const struct kite_table_row *r) {
    const struct pod_row *row = r->scratch;
    char buf[48];
    snprintf(buf, sizeof(buf), "%lld/%lld", (long long)row->ready, (long long)row->total);
    return cell_str(buf);
}

static json_object *pod_status(const struct kite_table_row *r) { return cell_str(((struct pod_row *)r->scratch)->reason.p); }

/* "N" or "N (<age of the last restart> ago)" */
static json_object *pod_restarts(const struct kite_table_row *r) {
    const struct pod_row *row = r->scratch;
    char buf[64];
    if (row->restarts != 0 && row->last_restart != INT64_MIN) {
        char ago[32];
        since_ns(row->last_restart, r->now_s, ago);
        snprintf(buf, sizeof(buf), "%lld (%s ago)", (long long)row->restarts, ago);
    } else {
        snprintf(buf, sizeof(buf), "%lld", (long long)row->restarts);
    }
    return cell_str(buf);
}

static json_object *pod_ip(const struct kite_table_row *r) {
    json_object *ips = OBJ(r->obj, "status", "podIPs");
    return cell_or(arr_len(ips) ? STR(json_object_array_get_idx(ips, 0), "ip") : STR(r->obj, "status", "podIP"), "<none>");
}
static json_object *pod_node(const struct kite_table_row *r) { return cell_or(STR(r->obj, "spec", "nodeName"), "<none>"); }
static json_object *pod_nominated_node(const struct kite_table_row *r) {
    return cell_or(STR(r->obj, "status", "nominatedNodeName"), "<none>");
}

/* "<true gates>/<gates>" */
static json_object *pod_readiness_gates(const struct kite_table_row *r) {
    json_object *gates = OBJ(r->obj, "spec", "readinessGates");
    if (!arr_len(gates)) return cell_str("<none>");
    size_t ok = 0;
    for (size_t i = 0; i < arr_len(gates); i++)
        if (pod_condition_true(r->obj, STR(json_object_array_get_idx(gates, i), "conditionType"))) ok++;
    char buf[48];
    snprintf(buf, sizeof(buf), "%zu/%zu", ok, arr_len(gates));
    return cell_str(buf);
}

static const struct kite_table_column pod_cols[] = {
    COL_NAME,
    {"Ready", pod_ready, "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0},
    {"Status", pod_status, "string", "", "The aggregate status of the containers in this pod.", 0},
    {"Restarts", pod_restarts, "string", "",
     "The number of times the containers in this pod have been restarted and when the last container in this pod "
     "has restarted.",
     0},
    COL_AGE,
    {"IP", pod_ip, "string", "", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.", 1},
    {"Node", pod_node, "string", "",
     "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply "
     "schedules this pod onto that node, assuming that it fits resource requirements.",
     1},
    {"Nominated Node", pod_nominated_node, "string", "",
     "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot schedule right "
     "away as preemption victims receive their graceful termination periods. This field does not guarantee that "
     "the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes "
     "become available sooner. Scheduler may also decide to give the resources on this node to a higher priority "
     "pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when "
     "the pod is scheduled.",
     1},
    {"Readiness Gates", pod_readiness_gates, "string", "",
     "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its "
     "containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" "
     "More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
     1},
};

static const struct kite_table_printer printer =
    TABLE_PRINTER(pod_cols, .scratch_size = sizeof(struct pod_row), .prepare = pod_prepare, .release = pod_release);

const struct kite_resource kite_kind_pod = {
    .schema = &kite_schema_pod,
    KITE_CORE_V1, .kind = "Pod", .list_kind = "PodList", .plural = "pods", .singular = "pod",
    .short_names = {"po"}, .categories = {"all"}, .namespaced = true, .has_status = true,
    .unconditional_update = true, .delete_returns_object = true, .smp = &smp, .table = &printer,
    .fields = fields, .defaults = pod_defaults,
};
