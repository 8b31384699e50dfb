#include <criterion/criterion.h>

#include "api/kinds/kinds.h"
#include "api/registry.h"
#include "api/table.h"
#include "base/clock.h"

/* "now" of the kubectl samples: 2026-12-02T09:56:45Z */
static int64_t now_s(void) {
    int64_t ns;
    cr_assert_eq(kite_time_parse("2026-12-02T09:56:45Z", &ns), 0);
    return ns / KITE_NS_PER_SEC;
}

/* The printer of the row serving kind (any group), or NULL. */
static const struct kite_table_printer *printer_for(const char *kind) {
    for (size_t i = 0; kind && kite_resources[i]; i++)
        if (strcmp(kite_resources[i]->kind, kind) == 0) return kite_resources[i]->table;
    return NULL;
}

/* Prints obj with the kind's printer and returns the cells as compact JSON (malloc'ed). */
static char *cells_of(const char *kind, const char *json) {
    const struct kite_table_printer *p = kind ? printer_for(kind) : kite_table_printer_default();
    cr_assert_not_null(p, "printer for %s", kind);
    json_object *obj = json_tokener_parse(json);
    cr_assert_not_null(obj, "bad test json: %s", json);
    json_object *cells = json_object_new_array();
    kite_table_cells(p, obj, now_s(), cells);
    cr_assert_eq(json_object_array_length(cells), p->n_columns, "one cell per column for %s", kind);
    char *s = strdup(json_object_to_json_string_ext(cells, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(cells);
    json_object_put(obj);
    return s;
}

struct row_case {
    const char *json, *cells;
};
static void check_rows(const char *kind, const struct row_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char *got = cells_of(kind, cases[i].json);
        cr_assert_str_eq(got, cases[i].cells, "%s case %zu", kind, i);
        free(got);
    }
}
#define CHECK_ROWS(kind, cases) check_rows(kind, cases, sizeof(cases) / sizeof(cases[0]))

#define NODE_INFO                                                                                                   \
    "\"nodeInfo\":{\"kubeletVersion\":\"v1.32.4\",\"osImage\":\"Debian GNU/Linux 12 (bookworm)\",\"kernelVersion\":" \
    "\"6.1.0-28-amd64\",\"containerRuntimeVersion\":\"containerd://1.7.22\"}"
#define ADDRS "\"addresses\":[{\"type\":\"Hostname\",\"address\":\"worker-node-3\"},{\"type\":\"InternalIP\",\"address\":\"10.0.0.13\"}]"
#define META "\"metadata\":{\"name\":\"worker-node-3\",\"creationTimestamp\":\"2026-11-02T09:56:45Z\",\"labels\":{\"node-role.kubernetes.io/worker\":\"\"}}"
#define NODE_WIDE "\"30d\",\"v1.32.4\",\"10.0.0.13\",\"<none>\",\"Debian GNU/Linux 12 (bookworm)\",\"6.1.0-28-amd64\",\"containerd://1.7.22\"]"
#define COND(t, s) "{\"type\":\"" t "\",\"status\":\"" s "\"}"

Test(table, node_cells) {
    static const struct row_case cases[] = {
        /* Ready */
        {"{" META ",\"status\":{\"conditions\":[" COND("MemoryPressure", "False") "," COND("Ready", "True") "]," ADDRS "," NODE_INFO "}}",
         "[\"worker-node-3\",\"Ready\",\"worker\"," NODE_WIDE},
        /* NotReady */
        {"{" META ",\"status\":{\"conditions\":[" COND("Ready", "False") "]," ADDRS "," NODE_INFO "}}",
         "[\"worker-node-3\",\"NotReady\",\"worker\"," NODE_WIDE},
        /* Ready=Unknown (node controller lost contact) prints NotReady, as upstream */
        {"{" META ",\"status\":{\"conditions\":[" COND("Ready", "Unknown") "]," ADDRS "," NODE_INFO "}}",
         "[\"worker-node-3\",\"NotReady\",\"worker\"," NODE_WIDE},
        /* no Ready condition at all */
        {"{" META ",\"status\":{\"conditions\":[" COND("DiskPressure", "False") "]," ADDRS "," NODE_INFO "}}",
         "[\"worker-node-3\",\"Unknown\",\"worker\"," NODE_WIDE},
        /* cordoned */
        {"{" META ",\"spec\":{\"unschedulable\":true},\"status\":{\"conditions\":[" COND("Ready", "True") "]," ADDRS "," NODE_INFO "}}",
         "[\"worker-node-3\",\"Ready,SchedulingDisabled\",\"worker\"," NODE_WIDE},
        {"{" META ",\"spec\":{\"unschedulable\":true},\"status\":{" ADDRS "," NODE_INFO "}}",
         "[\"worker-node-3\",\"Unknown,SchedulingDisabled\",\"worker\"," NODE_WIDE},
        {"{" META ",\"spec\":{\"unschedulable\":false},\"status\":{\"conditions\":[" COND("Ready", "True") "]," ADDRS "," NODE_INFO "}}",
         "[\"worker-node-3\",\"Ready\",\"worker\"," NODE_WIDE},
        /* roles: sorted, deduplicated, kubernetes.io/role value, empty suffix ignored */
        {"{\"metadata\":{\"name\":\"cp\",\"creationTimestamp\":\"2026-12-02T09:56:00Z\",\"labels\":{"
         "\"node-role.kubernetes.io/worker\":\"\",\"node-role.kubernetes.io/control-plane\":\"true\","
         "\"kubernetes.io/role\":\"master\",\"node-role.kubernetes.io/\":\"\",\"node-role.kubernetes.io/worker2\":\"\","
         "\"x/node-role.kubernetes.io/no\":\"\"}},"
         "\"status\":{\"conditions\":[" COND("Ready", "True") "]," NODE_INFO ",\"addresses\":["
         "{\"type\":\"ExternalIP\",\"address\":\"1.2.3.4\"},{\"type\":\"ExternalIP\",\"address\":\"5.6.7.8\"}]}}",
         "[\"cp\",\"Ready\",\"control-plane,master,worker,worker2\",\"45s\",\"v1.32.4\",\"<none>\",\"1.2.3.4\","
         "\"Debian GNU/Linux 12 (bookworm)\",\"6.1.0-28-amd64\",\"containerd://1.7.22\"]"},
        {"{\"metadata\":{\"name\":\"n\",\"labels\":{\"kubernetes.io/role\":\"worker\",\"node-role.kubernetes.io/worker\":\"\"}}}",
         "[\"n\",\"Unknown\",\"worker\",\"<unknown>\",\"\",\"<none>\",\"<none>\",\"<unknown>\",\"<unknown>\",\"<unknown>\"]"},
        {"{\"metadata\":{\"name\":\"n\",\"labels\":{\"kubernetes.io/role\":\"\"}}}",
         "[\"n\",\"Unknown\",\"<none>\",\"<unknown>\",\"\",\"<none>\",\"<none>\",\"<unknown>\",\"<unknown>\",\"<unknown>\"]"},
        /* everything missing or mistyped */
        {"{}", "[\"\",\"Unknown\",\"<none>\",\"<unknown>\",\"\",\"<none>\",\"<none>\",\"<unknown>\",\"<unknown>\",\"<unknown>\"]"},
        {"{\"metadata\":[],\"spec\":1,\"status\":{\"conditions\":{},\"addresses\":\"x\",\"nodeInfo\":[]}}",
         "[\"\",\"Unknown\",\"<none>\",\"<unknown>\",\"\",\"<none>\",\"<none>\",\"<unknown>\",\"<unknown>\",\"<unknown>\"]"},
        /* a creationTimestamp in the future beyond clock skew */
        {"{\"metadata\":{\"name\":\"f\",\"creationTimestamp\":\"2026-12-02T09:57:45Z\"}}",
         "[\"f\",\"Unknown\",\"<none>\",\"<invalid>\",\"\",\"<none>\",\"<none>\",\"<unknown>\",\"<unknown>\",\"<unknown>\"]"},
    };
    CHECK_ROWS("Node", cases);
}

Test(table, human_duration) {
    static const struct {
        int64_t s;
        const char *want;
    } cases[] = {
        {-100, "<invalid>"}, {-2, "<invalid>"}, {-1, "0s"}, {0, "0s"}, {45, "45s"}, {119, "119s"}, {120, "2m"},
        {150, "2m30s"}, {330, "5m30s"}, {599, "9m59s"}, {600, "10m"}, {10799, "179m"}, {10800, "3h"},
        {11520, "3h12m"}, {28799, "7h59m"}, {28800, "8h"}, {47 * 3600 + 3599, "47h"}, {48 * 3600, "2d"},
        {53 * 3600, "2d5h"}, {8 * 86400 - 1, "7d23h"}, {8 * 86400, "8d"}, {30 * 86400, "30d"},
        {729 * 86400, "729d"}, {730 * 86400, "2y"}, {745 * 86400, "2y15d"}, {2920 * 86400, "8y"},
        {3650 * 86400, "10y"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[32];
        kite_human_duration(cases[i].s, out);
        cr_assert_str_eq(out, cases[i].want, "%lld", (long long)cases[i].s);
    }
}

Test(table, events) {
    static const struct row_case cases[] = {
        /* core/v1, as in the kubectl samples */
        {"{\"metadata\":{\"name\":\"worker-node-3.1811a2b3c4d5e6f7\",\"namespace\":\"default\"},"
         "\"involvedObject\":{\"kind\":\"Node\",\"name\":\"worker-node-3\"},\"reason\":\"NodeReady\","
         "\"message\":\"Node worker-node-3 status is now: NodeReady\",\"type\":\"Normal\",\"count\":1,"
         "\"firstTimestamp\":\"2026-12-02T08:56:45Z\",\"lastTimestamp\":\"2026-12-02T08:58:45Z\","
         "\"source\":{\"component\":\"kubelet\",\"host\":\"worker-node-3\"},\"eventTime\":null}",
         "[\"58m\",\"Normal\",\"NodeReady\",\"node/worker-node-3\",\"\",\"kubelet, worker-node-3\","
         "\"Node worker-node-3 status is now: NodeReady\",\"60m\",1,\"worker-node-3.1811a2b3c4d5e6f7\"]"},
        /* no host; fieldPath; count > 1; message trimmed; no lastTimestamp -> first */
        {"{\"metadata\":{\"name\":\"p.1\"},\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"p\",\"fieldPath\":\"spec.containers{c}\"},"
         "\"reason\":\"Unhealthy\",\"message\":\"  probe failed\\n\",\"type\":\"Warning\",\"count\":3,"
         "\"firstTimestamp\":\"2026-12-02T09:46:45Z\",\"source\":{\"component\":\"node-controller\"}}",
         "[\"10m\",\"Warning\",\"Unhealthy\",\"pod/p\",\"spec.containers{c}\",\"node-controller\",\"probe failed\",\"10m\",3,\"p.1\"]"},
        /* new-style event written through core/v1: eventTime, reportingComponent/Instance, series, no count */
        {"{\"metadata\":{\"name\":\"e\"},\"involvedObject\":{\"kind\":\"Node\"},\"reason\":\"R\",\"type\":\"Normal\","
         "\"eventTime\":\"2026-12-02T09:50:45.000000Z\",\"reportingComponent\":\"kubelet\",\"reportingInstance\":\"n1\"}",
         "[\"6m\",\"Normal\",\"R\",\"node\",\"\",\"kubelet, n1\",\"\",\"6m\",1,\"e\"]"},
        /* events.k8s.io/v1 shape */
        {"{\"apiVersion\":\"events.k8s.io/v1\",\"metadata\":{\"name\":\"e1\"},\"regarding\":{\"kind\":\"Pod\",\"name\":\"p\"},"
         "\"note\":\" hi \",\"type\":\"Warning\",\"reason\":\"X\",\"eventTime\":\"2026-12-02T09:50:45.000000Z\","
         "\"reportingController\":\"kubelet\",\"reportingInstance\":\"n1\","
         "\"series\":{\"count\":4,\"lastObservedTime\":\"2026-12-02T09:55:45.123456Z\"}}",
         "[\"59s\",\"Warning\",\"X\",\"pod/p\",\"\",\"kubelet, n1\",\"hi\",\"6m\",4,\"e1\"]"},
        {"{}", "[\"<unknown>\",\"\",\"\",\"\",\"\",\"\",\"\",\"<unknown>\",1,\"\"]"},
    };
    CHECK_ROWS("Event", cases);
}

#define POD_META "\"metadata\":{\"name\":\"web\",\"namespace\":\"default\",\"creationTimestamp\":\"2026-11-29T09:56:45Z\""
#define RUNNING_CS "{\"name\":\"main\",\"ready\":true,\"restartCount\":0,\"state\":{\"running\":{}}}"

Test(table, pods) {
    static const struct row_case cases[] = {
        {"{" POD_META "},\"spec\":{\"nodeName\":\"worker-node-3\",\"containers\":[{\"name\":\"main\"}]},"
         "\"status\":{\"phase\":\"Running\",\"podIP\":\"10.244.13.5\",\"podIPs\":[{\"ip\":\"10.244.13.5\"}],"
         "\"conditions\":[" COND("Ready", "True") "],\"containerStatuses\":[" RUNNING_CS "]}}",
         "[\"web\",\"1/1\",\"Running\",\"0\",\"3d\",\"10.244.13.5\",\"worker-node-3\",\"<none>\",\"<none>\"]"},
        /* Succeeded -> the container's Completed reason */
        {"{" POD_META "},\"spec\":{\"nodeName\":\"n\",\"containers\":[{\"name\":\"main\"}]},"
         "\"status\":{\"phase\":\"Succeeded\",\"podIP\":\"10.244.13.7\",\"containerStatuses\":[{\"name\":\"main\",\"ready\":false,"
         "\"restartCount\":0,\"state\":{\"terminated\":{\"exitCode\":0,\"reason\":\"Completed\"}}}]}}",
         "[\"web\",\"0/1\",\"Completed\",\"0\",\"3d\",\"10.244.13.7\",\"n\",\"<none>\",\"<none>\"]"},
        /* restarts with a recent termination; waiting reason wins; pending with no IP/node */
        {"{" POD_META "},\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]},"
         "\"status\":{\"phase\":\"Running\",\"containerStatuses\":["
         "{\"name\":\"a\",\"ready\":false,\"restartCount\":2,\"state\":{\"waiting\":{\"reason\":\"CrashLoopBackOff\"}},"
         "\"lastState\":{\"terminated\":{\"exitCode\":1,\"finishedAt\":\"2026-12-02T09:51:45Z\"}}},"
         "{\"name\":\"b\",\"ready\":true,\"restartCount\":1,\"state\":{\"running\":{}}}]}}",
         "[\"web\",\"1/2\",\"CrashLoopBackOff\",\"3 (5m ago)\",\"3d\",\"<none>\",\"<none>\",\"<none>\",\"<none>\"]"},
        /* terminated without reason */
        {"{" POD_META "},\"spec\":{\"containers\":[{\"name\":\"a\"}]},\"status\":{\"phase\":\"Failed\",\"containerStatuses\":["
         "{\"name\":\"a\",\"state\":{\"terminated\":{\"exitCode\":137,\"signal\":9}}}]}}",
         "[\"web\",\"0/1\",\"Signal:9\",\"0\",\"3d\",\"<none>\",\"<none>\",\"<none>\",\"<none>\"]"},
        /* init containers */
        {"{" POD_META "},\"spec\":{\"initContainers\":[{\"name\":\"i1\"},{\"name\":\"i2\"}],\"containers\":[{\"name\":\"a\"}]},"
         "\"status\":{\"phase\":\"Pending\",\"initContainerStatuses\":["
         "{\"name\":\"i1\",\"state\":{\"terminated\":{\"exitCode\":0}}},"
         "{\"name\":\"i2\",\"state\":{\"waiting\":{\"reason\":\"PodInitializing\"}}}],"
         "\"containerStatuses\":[{\"name\":\"a\",\"state\":{\"waiting\":{\"reason\":\"PodInitializing\"}}}]}}",
         "[\"web\",\"0/1\",\"Init:1/2\",\"0\",\"3d\",\"<none>\",\"<none>\",\"<none>\",\"<none>\"]"},
        {"{" POD_META "},\"spec\":{\"initContainers\":[{\"name\":\"i1\"}],\"containers\":[{\"name\":\"a\"}]},"
         "\"status\":{\"phase\":\"Pending\",\"initContainerStatuses\":["
         "{\"name\":\"i1\",\"restartCount\":4,\"state\":{\"terminated\":{\"exitCode\":2}}}]}}",
         "[\"web\",\"0/1\",\"Init:ExitCode:2\",\"4\",\"3d\",\"<none>\",\"<none>\",\"<none>\",\"<none>\"]"},
        /* a sidecar (restartable init container) counts as a container */
        {"{" POD_META "},\"spec\":{\"initContainers\":[{\"name\":\"s\",\"restartPolicy\":\"Always\"}],\"containers\":[{\"name\":\"main\"}]},"
         "\"status\":{\"phase\":\"Running\",\"conditions\":[" COND("Initialized", "True") "," COND("Ready", "True") "],"
         "\"initContainerStatuses\":[{\"name\":\"s\",\"ready\":true,\"started\":true,\"state\":{\"running\":{}}}],"
         "\"containerStatuses\":[" RUNNING_CS "]}}",
         "[\"web\",\"2/2\",\"Running\",\"0\",\"3d\",\"<none>\",\"<none>\",\"<none>\",\"<none>\"]"},
        /* terminating, readiness gates, nominated node */
        {"{\"metadata\":{\"name\":\"web\",\"creationTimestamp\":\"2026-12-02T09:56:00Z\",\"deletionTimestamp\":\"2026-12-02T09:56:40Z\"},"
         "\"spec\":{\"containers\":[{\"name\":\"main\"}],\"readinessGates\":[{\"conditionType\":\"g1\"},{\"conditionType\":\"g2\"}]},"
         "\"status\":{\"phase\":\"Running\",\"nominatedNodeName\":\"n2\",\"conditions\":[" COND("g1", "True") "," COND("g2", "False") "],"
         "\"containerStatuses\":[" RUNNING_CS "]}}",
         "[\"web\",\"1/1\",\"Terminating\",\"0\",\"45s\",\"<none>\",\"<none>\",\"n2\",\"1/2\"]"},
        {"{\"metadata\":{\"name\":\"web\",\"deletionTimestamp\":\"2026-12-02T09:56:40Z\"},\"status\":{\"phase\":\"Running\",\"reason\":\"NodeLost\"}}",
         "[\"web\",\"0/0\",\"Unknown\",\"0\",\"<unknown>\",\"<none>\",\"<none>\",\"<none>\",\"<none>\"]"},
        {"{}", "[\"\",\"0/0\",\"\",\"0\",\"<unknown>\",\"<none>\",\"<none>\",\"<none>\",\"<none>\"]"},
    };
    CHECK_ROWS("Pod", cases);
}

Test(table, other_kinds) {
    static const struct row_case ns[] = {
        {"{\"metadata\":{\"name\":\"default\",\"creationTimestamp\":\"2026-10-23T09:56:45Z\"},\"status\":{\"phase\":\"Active\"}}",
         "[\"default\",\"Active\",\"40d\"]"},
        {"{}", "[\"\",\"\",\"<unknown>\"]"},
    };
    CHECK_ROWS("Namespace", ns);
    static const struct row_case lease[] = {
        {"{\"metadata\":{\"name\":\"worker-node-3\",\"creationTimestamp\":\"2026-11-02T09:56:45Z\"},"
         "\"spec\":{\"holderIdentity\":\"worker-node-3\",\"leaseDurationSeconds\":40}}",
         "[\"worker-node-3\",\"worker-node-3\",\"30d\"]"},
        {"{\"metadata\":{\"name\":\"l\"},\"spec\":{\"holderIdentity\":null}}", "[\"l\",\"\",\"<unknown>\"]"},
    };
    CHECK_ROWS("Lease", lease);
    static const struct row_case eps[] = {
        {"{\"metadata\":{\"name\":\"kube-dns-7x2lp\",\"creationTimestamp\":\"2026-10-23T09:56:45Z\"},\"addressType\":\"IPv4\","
         "\"ports\":[{\"name\":\"dns\",\"port\":53},{\"name\":\"dns-tcp\",\"port\":53},{\"name\":\"metrics\",\"port\":9153}],"
         "\"endpoints\":[{\"addresses\":[\"10.244.11.2\"]}]}",
         "[\"kube-dns-7x2lp\",\"IPv4\",\"53,53,9153\",\"10.244.11.2\",\"40d\"]"},
        {"{\"metadata\":{\"name\":\"e\"},\"addressType\":\"IPv4\",\"ports\":[{\"name\":\"http\"},{},{\"port\":1},{\"port\":2},{\"port\":3}],"
         "\"endpoints\":[{\"addresses\":[\"a\",\"b\"]},{\"addresses\":[\"c\"]},{\"addresses\":[\"d\",\"e\"]}]}",
         "[\"e\",\"IPv4\",\"http,*,1 + 2 more...\",\"a,b,c + 2 more...\",\"<unknown>\"]"},
        {"{\"metadata\":{\"name\":\"e\"},\"addressType\":\"IPv6\",\"ports\":[],\"endpoints\":[]}",
         "[\"e\",\"IPv6\",\"<unset>\",\"<unset>\",\"<unknown>\"]"},
    };
    CHECK_ROWS("EndpointSlice", eps);
    /* printService: External-IP per type, node ports in Port(s), the selector (wide) */
#define SVC_META "\"metadata\":{\"name\":\"s\",\"creationTimestamp\":\"2026-12-01T09:56:45Z\"}"
    static const struct row_case svc[] = {
        {"{" SVC_META ",\"spec\":{\"type\":\"ClusterIP\",\"clusterIP\":\"10.96.0.10\",\"ports\":[{\"port\":53,"
         "\"protocol\":\"UDP\"},{\"port\":53,\"protocol\":\"TCP\"}],\"selector\":{\"k8s-app\":\"dns\",\"a\":\"b\"}}}",
         "[\"s\",\"ClusterIP\",\"10.96.0.10\",\"<none>\",\"53/UDP,53/TCP\",\"24h\",\"a=b,k8s-app=dns\"]"},
        {"{" SVC_META ",\"spec\":{\"type\":\"NodePort\",\"clusterIP\":\"10.96.0.11\",\"externalIPs\":[\"1.2.3.4\"],"
         "\"ports\":[{\"port\":80,\"nodePort\":30080,\"protocol\":\"TCP\"}]}}",
         "[\"s\",\"NodePort\",\"10.96.0.11\",\"1.2.3.4\",\"80:30080/TCP\",\"24h\",\"<none>\"]"},
        {"{" SVC_META ",\"spec\":{\"type\":\"LoadBalancer\",\"clusterIP\":\"10.96.0.12\",\"ports\":[]},"
         "\"status\":{\"loadBalancer\":{}}}",
         "[\"s\",\"LoadBalancer\",\"10.96.0.12\",\"<pending>\",\"<none>\",\"24h\",\"<none>\"]"},
        {"{" SVC_META ",\"spec\":{\"type\":\"LoadBalancer\",\"clusterIP\":\"10.96.0.12\",\"externalIPs\":[\"9.9.9.9\"]},"
         "\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"5.6.7.8\"},{\"hostname\":\"lb.example\"}]}}}",
         "[\"s\",\"LoadBalancer\",\"10.96.0.12\",\"9.9.9.9,5.6.7.8,lb.example\",\"<none>\",\"24h\",\"<none>\"]"},
        {"{" SVC_META ",\"spec\":{\"type\":\"ExternalName\",\"externalName\":\"db.example.com\"}}",
         "[\"s\",\"ExternalName\",\"<none>\",\"db.example.com\",\"<none>\",\"24h\",\"<none>\"]"},
        {"{" SVC_META ",\"spec\":{\"type\":\"ClusterIP\",\"clusterIP\":\"None\",\"ports\":[{\"port\":80,\"protocol\":\"TCP\"}]}}",
         "[\"s\",\"ClusterIP\",\"None\",\"<none>\",\"80/TCP\",\"24h\",\"<none>\"]"},
    };
    CHECK_ROWS("Service", svc);
    /* printConfigMap, printSecret, printServiceAccount: key and list counts as numbers */
#define CM_META "\"metadata\":{\"name\":\"c\",\"creationTimestamp\":\"2026-12-01T09:56:45Z\"}"
    static const struct row_case cm[] = {
        {"{" CM_META ",\"data\":{\"a\":\"1\",\"b\":\"2\"},\"binaryData\":{\"c\":\"AA==\"}}", "[\"c\",3,\"24h\"]"},
        {"{" CM_META "}", "[\"c\",0,\"24h\"]"},
    };
    CHECK_ROWS("ConfigMap", cm);
    static const struct row_case secret[] = {
        {"{" CM_META ",\"type\":\"kubernetes.io/tls\",\"data\":{\"tls.crt\":\"AA==\",\"tls.key\":\"AA==\"}}",
         "[\"c\",\"kubernetes.io/tls\",2,\"24h\"]"},
        {"{" CM_META ",\"type\":\"Opaque\"}", "[\"c\",\"Opaque\",0,\"24h\"]"},
    };
    CHECK_ROWS("Secret", secret);
    static const struct row_case sa[] = {
        {"{" CM_META ",\"secrets\":[{\"name\":\"t\"}]}", "[\"c\",1,\"24h\"]"},
        {"{" CM_META "}", "[\"c\",0,\"24h\"]"},
    };
    CHECK_ROWS("ServiceAccount", sa);
    static const struct row_case def[] = {
        {"{\"metadata\":{\"name\":\"x\",\"creationTimestamp\":\"2026-12-02T09:54:15Z\"}}", "[\"x\",\"2m30s\"]"},
    };
    check_rows(NULL, def, 1);
}

Test(table, lookup_and_columns) {
    cr_assert_null(printer_for("Widget"));
    cr_assert_null(printer_for(NULL));
    cr_assert_not_null(kite_table_printer_default());
    static const struct {
        const char *kind;
        const char *names; /* name:priority[:format] joined by | */
    } cases[] = {
        {"Node", "Name:0:name|Status:0|Roles:0|Age:0|Version:0|Internal-IP:1|External-IP:1|OS-Image:1|Kernel-Version:1|Container-Runtime:1"},
        {"Pod", "Name:0:name|Ready:0|Status:0|Restarts:0|Age:0|IP:1|Node:1|Nominated Node:1|Readiness Gates:1"},
        {"Event", "Last Seen:0|Type:0|Reason:0|Object:0|Subobject:1|Source:1|Message:0|First Seen:1|Count:1|Name:1:name"},
        {"EndpointSlice", "Name:0:name|AddressType:0|Ports:0|Endpoints:0|Age:0"},
        {"Service", "Name:0:name|Type:0|Cluster-IP:0|External-IP:0|Port(s):0|Age:0|Selector:1"},
        {"Lease", "Name:0:name|Holder:0|Age:0"},
        {"Namespace", "Name:0:name|Status:0|Age:0"},
        {NULL, "Name:0:name|Age:0"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct kite_table_printer *p = cases[i].kind ? printer_for(cases[i].kind) : kite_table_printer_default();
        struct kite_buf b = {0}, got = {0};
        kite_table_columns_json(p, &b);
        json_object *cols = json_tokener_parse(b.p);
        cr_assert_not_null(cols, "%s", b.p);
        cr_assert_eq(json_object_array_length(cols), p->n_columns);
        for (size_t j = 0; j < p->n_columns; j++) cr_assert_not_null(p->columns[j].cell, "%s column %zu has no cell", cases[i].kind, j);
        for (size_t j = 0; j < json_object_array_length(cols); j++) {
            json_object *c = json_object_array_get_idx(cols, j);
            const char *fmt = json_object_get_string(json_object_object_get(c, "format"));
            cr_assert_str_eq(json_object_get_string(json_object_object_get(c, "type")), "string");
            cr_assert_gt(strlen(json_object_get_string(json_object_object_get(c, "description"))), 10);
            kite_buf_printf(&got, "%s%s:%d%s%s", j ? "|" : "", json_object_get_string(json_object_object_get(c, "name")),
                            json_object_get_int(json_object_object_get(c, "priority")), *fmt ? ":" : "", fmt);
        }
        cr_assert_str_eq(got.p, cases[i].names);
        json_object_put(cols);
        kite_buf_release(&b);
        kite_buf_release(&got);
    }
}
