/* The protobuf codec (api/protobuf.h): field numbers checked against Kubernetes' generated.proto,
 * every served kind's sample round-tripped JSON -> protobuf -> JSON, the bytes kubectl sends,
 * and malformed bodies refused. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "api/protobuf.h"
#include "api/registry.h"
#include "json/parse.h"
#include "json/patch.h"

/* ---- field numbers ------------------------------------------------------------------------ */

/* The number of the field at dotted path (lists and maps stepped through) in s; 0 if absent. */
static unsigned number_at(const struct kite_schema *s, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    unsigned num = 0;
    for (char *save = NULL, *seg = strtok_r(buf, ".", &save); seg; seg = strtok_r(NULL, ".", &save)) {
        while (s->type == KITE_SCHEMA_LIST || s->type == KITE_SCHEMA_MAP) s = s->elem;
        const struct kite_schema_field *f = s->fields;
        while (f && f->name && strcmp(f->name, seg) != 0) f++;
        if (!f || !f->name) return 0;
        num = f->number;
        s = f->schema;
    }
    return num;
}

struct num_case {
    const struct kite_schema *schema;
    const char *path;
    unsigned number;
};

/* Transcribed by hand from the .proto text (k8s.io/api core/v1, coordination/v1, events/v1 and
 * k8s.io/apimachinery meta/v1 generated.proto, e.g. `optional string podCIDR = 1;`), a sample
 * across every message kite types, favouring the out-of-order ones. */
Test(protobuf, field_numbers_match_generated_proto) {
    const struct num_case cases[] = {
        /* meta/v1 ObjectMeta: managedFields = 17 (15, 16 are retired), OwnerReference.apiVersion = 5 */
        {&kite_schema_node, "metadata.name", 1},
        {&kite_schema_node, "metadata.namespace", 3},
        {&kite_schema_node, "metadata.resourceVersion", 6},
        {&kite_schema_node, "metadata.creationTimestamp", 8},
        {&kite_schema_node, "metadata.deletionGracePeriodSeconds", 10},
        {&kite_schema_node, "metadata.labels", 11},
        {&kite_schema_node, "metadata.annotations", 12},
        {&kite_schema_node, "metadata.ownerReferences", 13},
        {&kite_schema_node, "metadata.ownerReferences.kind", 1},
        {&kite_schema_node, "metadata.ownerReferences.apiVersion", 5},
        {&kite_schema_node, "metadata.ownerReferences.blockOwnerDeletion", 7},
        {&kite_schema_node, "metadata.finalizers", 14},
        {&kite_schema_node, "metadata.managedFields", 17},
        {&kite_schema_node, "metadata.managedFields.fieldsType", 6},
        {&kite_schema_node, "metadata.managedFields.fieldsV1", 7},
        {&kite_schema_node, "metadata.managedFields.subresource", 8},
        /* core/v1 */
        {&kite_schema_node, "spec.podCIDR", 1},
        /* the security contexts (kubectl writes pod templates as protobuf) */
        {&kite_schema_pod, "spec.securityContext", 14},
        {&kite_schema_pod, "spec.securityContext.windowsOptions", 8},
        {&kite_schema_pod, "spec.securityContext.windowsOptions.hostProcess", 4},
        {&kite_schema_pod, "spec.securityContext.runAsGroup", 6},
        {&kite_schema_pod, "spec.securityContext.supplementalGroups", 4},
        {&kite_schema_pod, "spec.securityContext.supplementalGroupsPolicy", 12},
        {&kite_schema_pod, "spec.securityContext.fsGroup", 5},
        {&kite_schema_pod, "spec.securityContext.sysctls.value", 2},
        {&kite_schema_pod, "spec.securityContext.seccompProfile.localhostProfile", 2},
        {&kite_schema_pod, "spec.securityContext.appArmorProfile", 11},
        {&kite_schema_pod, "spec.securityContext.seLinuxChangePolicy", 13},
        {&kite_schema_pod, "spec.containers.securityContext", 15},
        {&kite_schema_pod, "spec.containers.securityContext.capabilities.drop", 2},
        {&kite_schema_pod, "spec.containers.securityContext.seLinuxOptions.level", 4},
        {&kite_schema_pod, "spec.containers.securityContext.windowsOptions", 10},
        {&kite_schema_pod, "spec.containers.securityContext.runAsUser", 4},
        {&kite_schema_pod, "spec.containers.securityContext.runAsGroup", 8},
        {&kite_schema_pod, "spec.containers.securityContext.allowPrivilegeEscalation", 7},
        {&kite_schema_pod, "spec.containers.securityContext.procMount", 9},
        {&kite_schema_pod, "spec.containers.securityContext.seccompProfile", 11},
        {&kite_schema_pod, "spec.containers.securityContext.appArmorProfile", 12},
        {&kite_schema_service, "spec.clusterIPs", 18},
        {&kite_schema_service, "spec.ports.targetPort", 4},
        {&kite_schema_service, "spec.ports.appProtocol", 6},
        {&kite_schema_service, "spec.internalTrafficPolicy", 22},
        {&kite_schema_endpointslice, "addressType", 4},
        {&kite_schema_endpointslice, "endpoints.nodeName", 6},
        {&kite_schema_endpointslice, "endpoints.conditions.terminating", 3},
        {&kite_schema_endpoints, "subsets", 2},
        {&kite_schema_endpoints, "subsets.addresses.targetRef", 2},
        {&kite_schema_endpoints, "subsets.addresses.hostname", 3},
        {&kite_schema_endpoints, "subsets.notReadyAddresses.nodeName", 4},
        {&kite_schema_endpoints, "subsets.ports.port", 2},
        {&kite_schema_endpoints, "subsets.ports.protocol", 3},
        {&kite_schema_endpoints, "subsets.ports.appProtocol", 4},
        {&kite_schema_node, "spec.externalID", 2},
        {&kite_schema_node, "spec.podCIDRs", 7},
        {&kite_schema_node, "spec.taints.timeAdded", 4},
        {&kite_schema_node, "status.capacity", 1},
        {&kite_schema_node, "status.nodeInfo.architecture", 10},
        {&kite_schema_node, "status.volumesAttached.devicePath", 2},
        {&kite_schema_node, "status.runtimeHandlers", 12},
        {&kite_schema_node, "status.daemonEndpoints.kubeletEndpoint.Port", 1},
        {&kite_schema_pod, "spec.containers", 2},
        {&kite_schema_pod, "spec.initContainers", 20},
        {&kite_schema_pod, "spec.automountServiceAccountToken", 21},
        {&kite_schema_pod, "spec.tolerations", 22},
        {&kite_schema_pod, "spec.shareProcessNamespace", 27},
        {&kite_schema_pod, "spec.overhead", 32},
        {&kite_schema_pod, "spec.hostUsers", 37},
        {&kite_schema_pod, "spec.containers.envFrom", 19},
        {&kite_schema_pod, "spec.containers.terminationMessagePolicy", 20},
        {&kite_schema_pod, "spec.containers.restartPolicy", 24},
        {&kite_schema_pod, "spec.containers.volumeMounts.recursiveReadOnly", 7},
        {&kite_schema_pod, "status.nominatedNodeName", 11},
        {&kite_schema_pod, "status.hostIPs", 16},
        {&kite_schema_pod, "status.initContainerStatuses", 10},
        {&kite_schema_pod, "status.containerStatuses", 8},
        {&kite_schema_pod, "status.containerStatuses.imageID", 7},
        {&kite_schema_pod, "status.containerStatuses.state.terminated.containerID", 7},
        {&kite_schema_namespace, "status.conditions.lastTransitionTime", 4},
        {&kite_schema_configmap, "data", 2},
        {&kite_schema_configmap, "binaryData", 3},
        {&kite_schema_configmap, "immutable", 4},
        {&kite_schema_secret, "data", 2},
        {&kite_schema_secret, "type", 3},
        {&kite_schema_secret, "stringData", 4},
        {&kite_schema_secret, "immutable", 5},
        {&kite_schema_serviceaccount, "secrets", 2},
        {&kite_schema_serviceaccount, "secrets.fieldPath", 7},
        {&kite_schema_serviceaccount, "automountServiceAccountToken", 4},
        {&kite_schema_event, "involvedObject", 2},
        {&kite_schema_event, "eventTime", 10},
        {&kite_schema_event, "reportingInstance", 15},
        /* events/v1 and coordination/v1 */
        {&kite_schema_event_v1, "eventTime", 2},
        {&kite_schema_event_v1, "regarding", 8},
        {&kite_schema_event_v1, "deprecatedCount", 15},
        {&kite_schema_lease, "spec.holderIdentity", 1},
        {&kite_schema_lease, "spec.renewTime", 4},
        {&kite_schema_lease, "spec.preferredHolder", 7},
        /* authorization/v1 and authentication/v1 (the access reviews): status.denied = 4 after reason = 2 */
        {&kite_schema_selfsubjectaccessreview, "spec.resourceAttributes.namespace", 1},
        {&kite_schema_selfsubjectaccessreview, "spec.resourceAttributes.subresource", 6},
        {&kite_schema_selfsubjectaccessreview, "spec.resourceAttributes.name", 7},
        {&kite_schema_selfsubjectaccessreview, "spec.resourceAttributes.labelSelector.requirements", 2},
        {&kite_schema_selfsubjectaccessreview, "spec.nonResourceAttributes", 2},
        {&kite_schema_selfsubjectaccessreview, "spec.nonResourceAttributes.verb", 2},
        {&kite_schema_selfsubjectaccessreview, "status.denied", 4},
        {&kite_schema_selfsubjectaccessreview, "status.evaluationError", 3},
        {&kite_schema_subjectaccessreview, "spec.user", 3},
        {&kite_schema_subjectaccessreview, "spec.extra", 5},
        {&kite_schema_subjectaccessreview, "spec.uid", 6},
        {&kite_schema_localsubjectaccessreview, "status", 3},
        {&kite_schema_selfsubjectrulesreview, "spec.namespace", 1},
        {&kite_schema_selfsubjectrulesreview, "status.resourceRules.resourceNames", 4},
        {&kite_schema_selfsubjectrulesreview, "status.nonResourceRules.nonResourceURLs", 2},
        {&kite_schema_selfsubjectrulesreview, "status.evaluationError", 4},
        {&kite_schema_selfsubjectreview, "status", 2},
        {&kite_schema_selfsubjectreview, "status.userInfo.groups", 3},
        {&kite_schema_selfsubjectreview, "status.userInfo.extra", 4},
        /* meta/v1 around objects */
        {&kite_schema_status, "code", 6},
        {&kite_schema_status, "details.uid", 6},
        {&kite_schema_status, "details.causes", 4},
        {&kite_schema_status, "details.causes.field", 3},
        {&kite_schema_list_meta, "continue", 3},
        {&kite_schema_list_meta, "remainingItemCount", 4},
        {&kite_schema_delete_options, "gracePeriodSeconds", 1},
        {&kite_schema_delete_options, "preconditions.resourceVersion", 2},
        {&kite_schema_delete_options, "propagationPolicy", 4},
        {&kite_schema_delete_options, "dryRun", 5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_expect_eq(number_at(cases[i].schema, cases[i].path), cases[i].number, "%s: %u, want %u", cases[i].path,
                     number_at(cases[i].schema, cases[i].path), cases[i].number);
    /* kind and apiVersion travel in the envelope */
    cr_expect_eq(number_at(&kite_schema_pod, "kind"), 0);
    cr_expect_eq(number_at(&kite_schema_pod, "apiVersion"), 0);
}

/* No two fields of one message share a number (a transcription slip would). */
static void unique_numbers(const struct kite_schema *s, int depth) {
    if (depth > 20 || !s) return;
    if (s->type == KITE_SCHEMA_LIST || s->type == KITE_SCHEMA_MAP) {
        unique_numbers(s->elem, depth + 1);
        return;
    }
    if (s->type != KITE_SCHEMA_OBJECT) return;
    for (const struct kite_schema_field *f = s->fields; f && f->name; f++) {
        for (const struct kite_schema_field *g = f + 1; g->name; g++)
            cr_expect(!f->number || f->number != g->number, "%s: %s and %s share %u", s->go_type, f->name, g->name,
                      f->number);
        if (strcmp(f->name, "kind") && strcmp(f->name, "apiVersion"))
            cr_expect(f->number, "%s.%s has no number", s->go_type, f->name);
        unique_numbers(f->schema, depth + 1);
    }
}

Test(protobuf, numbers_unique_and_present) {
    for (size_t i = 0; kite_resources[i]; i++) unique_numbers(kite_resources[i]->schema, 0);
    unique_numbers(&kite_schema_status, 0);
    unique_numbers(&kite_schema_delete_options, 0);
}

/* ---- round trips ---------------------------------------------------------------------------- */

static json_object *parse(const char *text) {
    enum json_tokener_error e;
    size_t used;
    json_object *o = kite_json_parse(text, strlen(text), 64, &e, &used);
    cr_assert(o, "bad test JSON: %s", text);
    return o;
}

static void round_trip(const char *json) {
    json_object *in = parse(json);
    struct kite_buf b = {0};
    cr_assert_eq(kite_pb_encode_any(in, &b), 0, "encode: %s", json);
    cr_assert(b.len > 4 && memcmp(b.p, "k8s\0", 4) == 0);
    json_object *kind = json_object_object_get(in, "kind"), *av = json_object_object_get(in, "apiVersion");
    bool list;
    const struct kite_schema *s = kite_pb_schema_for(json_object_get_string(av), json_object_get_string(kind), &list);
    cr_assert(s);
    json_object *out = NULL;
    char *err = NULL;
    if (!list) {
        cr_assert_eq(kite_pb_decode(s, b.p, b.len, 64, &out, &err), 0, "decode: %s", err ? err : "");
        cr_expect(kite_json_equal(in, out), "round trip changed\n%s\n%s", json,
                  json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN));
    }
    json_object_put(out);
    json_object_put(in);
    kite_buf_release(&b);
}

#define META(kind, av) "\"kind\":\"" kind "\",\"apiVersion\":\"" av "\""
#define OMETA                                                                                                  \
    "\"metadata\":{\"name\":\"n\",\"namespace\":\"ns\",\"uid\":\"u-1\",\"resourceVersion\":\"42\",\"generation\":3,"      \
    "\"creationTimestamp\":\"2024-05-06T07:08:09Z\",\"labels\":{\"a\":\"b\",\"c\":\"\"},\"annotations\":{\"x\":\"h\xc3\xa9\"}," \
    "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"n1\",\"uid\":\"u2\",\"controller\":true}]," \
    "\"finalizers\":[\"f/1\",\"f/2\"],\"managedFields\":[{\"manager\":\"kubectl\",\"operation\":\"Apply\","    \
    "\"apiVersion\":\"v1\",\"time\":\"2024-05-06T07:08:09Z\",\"fieldsType\":\"FieldsV1\","                    \
    "\"fieldsV1\":{\"f:data\":{\".\":{},\"f:a\":{}}}}]}"

Test(protobuf, every_kind_round_trips) {
    round_trip("{" META("Namespace", "v1") "," OMETA ",\"spec\":{\"finalizers\":[\"kubernetes\"]},"
               "\"status\":{\"phase\":\"Terminating\",\"conditions\":[{\"type\":\"NamespaceDeletionContentFailure\","
               "\"status\":\"False\",\"lastTransitionTime\":\"2024-01-01T00:00:00Z\",\"reason\":\"R\",\"message\":\"m\"}]}}");
    round_trip("{" META("ConfigMap", "v1") "," OMETA ",\"data\":{\"a\":\"b\",\"empty\":\"\"},"
               "\"binaryData\":{\"bin\":\"AAEC/w==\",\"two\":\"AAE=\",\"none\":\"\"},\"immutable\":true}");
    round_trip("{" META("Secret", "v1") "," OMETA ",\"type\":\"Opaque\",\"data\":{\"a\":\"Yg==\"}}");
    round_trip("{" META("ServiceAccount", "v1") "," OMETA ",\"secrets\":[{\"name\":\"s\",\"namespace\":\"ns\"}],"
               "\"imagePullSecrets\":[{\"name\":\"reg\"}],\"automountServiceAccountToken\":true}");
    round_trip("{" META("Lease", "coordination.k8s.io/v1") "," OMETA ",\"spec\":{\"holderIdentity\":\"n1\","
               "\"leaseDurationSeconds\":40,\"acquireTime\":\"2024-01-01T00:00:00.000000Z\","
               "\"renewTime\":\"2026-12-03T08:00:00.000037Z\",\"leaseTransitions\":2}}");
    round_trip("{" META("Node", "v1") "," OMETA ",\"spec\":{\"podCIDR\":\"10.0.0.0/24\",\"podCIDRs\":[\"10.0.0.0/24\"],"
               "\"unschedulable\":true,\"taints\":[{\"key\":\"k\",\"value\":\"v\",\"effect\":\"NoSchedule\","
               "\"timeAdded\":\"2024-01-01T00:00:00Z\"}]},\"status\":{\"capacity\":{\"cpu\":\"4\",\"memory\":\"8167848Ki\","
               "\"pods\":\"110\"},\"allocatable\":{\"cpu\":\"3500m\"},\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\","
               "\"status\":\"True\",\"lastHeartbeatTime\":\"2024-02-29T23:59:59Z\",\"lastTransitionTime\":\"1970-01-01T00:00:00Z\","
               "\"reason\":\"KubeletReady\",\"message\":\"ok\"}],\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.1.2.3\"}],"
               "\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":10250}},\"nodeInfo\":{\"machineID\":\"m\",\"systemUUID\":\"s\","
               "\"bootID\":\"b\",\"kernelVersion\":\"6.1\",\"osImage\":\"Debian\",\"containerRuntimeVersion\":\"runc\","
               "\"kubeletVersion\":\"v1.32.0\",\"kubeProxyVersion\":\"\",\"operatingSystem\":\"linux\",\"architecture\":\"amd64\","
               "\"swap\":{\"capacity\":1024}},\"images\":[{\"names\":[\"a:1\",\"a@sha256:00\"],\"sizeBytes\":123456789012}],"
               "\"volumesInUse\":[\"v\"],\"volumesAttached\":[{\"name\":\"v\",\"devicePath\":\"/dev/x\"}],"
               "\"runtimeHandlers\":[{\"name\":\"\",\"features\":{\"recursiveReadOnlyMounts\":true}}],"
               "\"features\":{\"supplementalGroupsPolicy\":true}}}");
    round_trip("{" META("Pod", "v1") "," OMETA ",\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\","
               "\"command\":[\"sh\",\"-c\"],\"args\":[\"sleep 1\",\"\"],\"ports\":[{\"name\":\"http\",\"containerPort\":80,"
               "\"protocol\":\"TCP\"}],\"env\":[{\"name\":\"A\",\"value\":\"1\"}],\"resources\":{\"limits\":{\"cpu\":\"1\"},"
               "\"requests\":{\"memory\":\"64Mi\"}},\"volumeMounts\":[{\"name\":\"v\",\"mountPath\":\"/v\",\"readOnly\":true}],"
               "\"terminationMessagePath\":\"/dev/termination-log\",\"imagePullPolicy\":\"IfNotPresent\",\"tty\":true}],"
               "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"activeDeadlineSeconds\":-5,"
               "\"dnsPolicy\":\"ClusterFirst\",\"nodeSelector\":{\"k\":\"v\"},\"serviceAccountName\":\"default\","
               "\"nodeName\":\"n1\",\"hostNetwork\":true,\"schedulerName\":\"default-scheduler\",\"tolerations\":[{\"key\":\"k\","
               "\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],\"priority\":-3,"
               "\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\"},"
               "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
               "\"lastTransitionTime\":\"2024-01-01T00:00:00Z\"}],\"hostIP\":\"10.1.2.3\",\"hostIPs\":[{\"ip\":\"10.1.2.3\"}],"
               "\"podIP\":\"10.0.0.5\",\"podIPs\":[{\"ip\":\"10.0.0.5\"}],\"startTime\":\"2024-01-01T00:00:00Z\","
               "\"containerStatuses\":[{\"name\":\"c\",\"state\":{\"terminated\":{\"exitCode\":0,\"signal\":9,"
               "\"reason\":\"Error\",\"startedAt\":\"2024-01-01T00:00:00Z\",\"finishedAt\":\"2024-01-01T00:00:01Z\","
               "\"containerID\":\"runc://x\"}},\"lastState\":{},\"ready\":false,\"restartCount\":0,\"image\":\"busybox\","
               "\"imageID\":\"\",\"containerID\":\"runc://x\",\"started\":true}],\"qosClass\":\"Burstable\"}}");
    /* security contexts, zero values included (runAsUser 0 is root, not absent) */
    round_trip("{" META("Pod", "v1") "," OMETA ",\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\","
               "\"securityContext\":{\"capabilities\":{\"add\":[\"NET_ADMIN\"],\"drop\":[\"ALL\"]},\"privileged\":false,"
               "\"seLinuxOptions\":{\"level\":\"s0:c1\"},\"runAsUser\":0,\"runAsGroup\":1000,\"runAsNonRoot\":false,"
               "\"readOnlyRootFilesystem\":true,\"allowPrivilegeEscalation\":false,\"procMount\":\"Default\","
               "\"seccompProfile\":{\"type\":\"RuntimeDefault\"},\"appArmorProfile\":{\"type\":\"Localhost\","
               "\"localhostProfile\":\"p\"}}}],\"securityContext\":{\"runAsUser\":1000,\"runAsNonRoot\":true,"
               "\"supplementalGroups\":[0,5,4000000000],\"fsGroup\":2000,\"sysctls\":[{\"name\":\"net.ipv4.ping_group_range\","
               "\"value\":\"0 0\"}],\"fsGroupChangePolicy\":\"OnRootMismatch\",\"windowsOptions\":{\"hostProcess\":false,"
               "\"runAsUserName\":\"u\"},\"supplementalGroupsPolicy\":\"Merge\",\"seccompProfile\":{\"type\":\"Localhost\","
               "\"localhostProfile\":\"x.json\"}}}}");
    round_trip("{" META("Pod", "v1") "," OMETA ",\"spec\":{\"containers\":[{\"name\":\"c\",\"securityContext\":{}}],"
               "\"securityContext\":{}}}");
    round_trip("{" META("Event", "v1") "," OMETA ",\"involvedObject\":{\"kind\":\"Node\",\"name\":\"n1\",\"uid\":\"n1\"},"
               "\"reason\":\"Starting\",\"message\":\"m\",\"source\":{\"component\":\"kubelet\",\"host\":\"n1\"},"
               "\"firstTimestamp\":\"2024-01-01T00:00:00Z\",\"lastTimestamp\":\"2024-01-01T00:00:05Z\",\"count\":2,"
               "\"type\":\"Normal\",\"eventTime\":\"2024-01-01T00:00:00.123456Z\",\"series\":{\"count\":2,"
               "\"lastObservedTime\":\"2024-01-01T00:00:05.000001Z\"},\"reportingComponent\":\"\",\"reportingInstance\":\"\"}");
    round_trip("{" META("Event", "events.k8s.io/v1") "," OMETA ",\"eventTime\":\"2024-01-01T00:00:00.000000Z\","
               "\"reportingController\":\"c\",\"reportingInstance\":\"i\",\"action\":\"A\",\"reason\":\"R\","
               "\"regarding\":{\"kind\":\"Pod\",\"name\":\"p\"},\"note\":\"n\",\"type\":\"Warning\",\"deprecatedCount\":3}");
    round_trip("{" META("Service", "v1") "," OMETA ",\"spec\":{\"ports\":[{\"name\":\"http\",\"protocol\":\"TCP\","
               "\"port\":80,\"targetPort\":\"web\",\"nodePort\":30080},{\"name\":\"b\",\"protocol\":\"UDP\",\"port\":53,"
               "\"targetPort\":5353}],\"selector\":{\"app\":\"web\"},\"clusterIP\":\"10.96.0.10\",\"clusterIPs\":[\"10.96.0.10\"],"
               "\"type\":\"NodePort\",\"sessionAffinity\":\"None\",\"externalTrafficPolicy\":\"Cluster\","
               "\"publishNotReadyAddresses\":true,\"ipFamilies\":[\"IPv4\"],\"ipFamilyPolicy\":\"SingleStack\","
               "\"internalTrafficPolicy\":\"Cluster\"},\"status\":{\"loadBalancer\":{}}}");
    round_trip("{" META("EndpointSlice", "discovery.k8s.io/v1") "," OMETA ",\"addressType\":\"IPv4\","
               "\"endpoints\":[{\"addresses\":[\"10.0.0.5\"],\"conditions\":{\"ready\":false,\"serving\":true,"
               "\"terminating\":true},\"targetRef\":{\"kind\":\"Pod\",\"namespace\":\"ns\",\"name\":\"p\",\"uid\":\"u\"},"
               "\"nodeName\":\"n1\",\"zone\":\"z\"}],\"ports\":[{\"name\":\"\",\"protocol\":\"TCP\",\"port\":8080}]}");
    round_trip("{" META("Status", "v1") ",\"metadata\":{},\"status\":\"Failure\",\"message\":\"pods \\\"x\\\" is invalid\","
               "\"reason\":\"Invalid\",\"details\":{\"name\":\"x\",\"kind\":\"pods\",\"causes\":[{\"reason\":\"FieldValueRequired\","
               "\"message\":\"Required value\",\"field\":\"spec.containers\"}]},\"code\":422}");
}

/* A list answers as {1 ListMeta, 2 repeated item}: checked byte by byte on a small one. */
Test(protobuf, list_bytes) {
    json_object *l = parse("{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\"},"
                           "\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":{\"name\":\"b\"},\"data\":{\"k\":\"v\"}}]}");
    struct kite_buf b = {0};
    cr_assert_eq(kite_pb_encode_any(l, &b), 0);
    static const unsigned char want[] = {
        'k', '8', 's', 0, 0x0a, 0x13, 0x0a, 0x02, 'v', '1', 0x12, 0x0d, 'C', 'o', 'n', 'f', 'i', 'g', 'M', 'a', 'p', 'L', 'i', 's', 't',
        0x12, 0x1b,
        0x0a, 0x03, 0x12, 0x01, '7',                               /* ListMeta{resourceVersion "7"} */
        0x12, 0x05, 0x0a, 0x03, 0x0a, 0x01, 'a',                   /* item {metadata {name a}} */
        0x12, 0x0d, 0x0a, 0x03, 0x0a, 0x01, 'b',                   /* item {metadata {name b}, */
        0x12, 0x06, 0x0a, 0x01, 'k', 0x12, 0x01, 'v',              /*       data {k: v}} */
        0x1a, 0x00, 0x22, 0x00};
    cr_assert_eq(b.len, sizeof want);
    cr_expect(memcmp(b.p, want, sizeof want) == 0);
    kite_buf_release(&b);
    json_object_put(l);
}

/* ---- what kubectl sends --------------------------------------------------------------------- */

static json_object *decode_ok(const struct kite_schema *s, const void *p, size_t n) {
    json_object *o = NULL;
    char *err = NULL;
    int r = kite_pb_decode(s, p, n, 64, &o, &err);
    cr_assert_eq(r, 0, "decode: %d %s", r, err ? err : "");
    return o;
}

static void expect_json(json_object *o, const char *want) {
    json_object *w = parse(want);
    cr_expect(kite_json_equal(o, w), "got %s\nwant %s", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), want);
    json_object_put(w);
    json_object_put(o);
}

/* kubectl drain's DELETE body (31 bytes, an empty DeleteOptions) */
Test(protobuf, kubectl_delete_options) {
    static const unsigned char body[] = {0x6b, 0x38, 0x73, 0x00, 0x0a, 0x13, 0x0a, 0x02, 0x76, 0x31, 0x12, 0x0d, 0x44, 0x65, 0x6c, 0x65,
                                         0x74, 0x65, 0x4f, 0x70, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00};
    expect_json(decode_ok(&kite_schema_delete_options, body, sizeof body), "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\"}");
    /* with --grace-period=0 (a pointer in Go: present though zero), preconditions and a policy */
    static const unsigned char grace[] = {'k', '8', 's', 0, 0x0a, 0x13, 0x0a, 0x02, 'v', '1', 0x12, 0x0d, 'D', 'e', 'l', 'e', 't', 'e',
                                          'O', 'p', 't', 'i', 'o', 'n', 's', 0x12, 0x13,
                                          0x08, 0x00,                                        /* gracePeriodSeconds 0 */
                                          0x12, 0x07, 0x0a, 0x01, 'u', 0x12, 0x02, '4', '2', /* preconditions */
                                          0x22, 0x06, 'O', 'r', 'p', 'h', 'a', 'n',          /* propagationPolicy */
                                          0x1a, 0x00, 0x22, 0x00};
    expect_json(decode_ok(&kite_schema_delete_options, grace, sizeof grace),
                "{\"kind\":\"DeleteOptions\",\"apiVersion\":\"v1\",\"gracePeriodSeconds\":0,"
                "\"preconditions\":{\"uid\":\"u\",\"resourceVersion\":\"42\"},\"propagationPolicy\":\"Orphan\"}");
}

/* `kubectl create namespace t1`: ObjectMeta with every string field written empty (as in the
 * SelfSubjectAccessReview kubectl sent, kubectl-wire.md 6.3), an empty spec and status. */
Test(protobuf, kubectl_create_namespace) {
    static const unsigned char body[] = {
        'k', '8', 's', 0, 0x0a, 0x0f, 0x0a, 0x02, 'v', '1', 0x12, 0x09, 'N', 'a', 'm', 'e', 's', 'p', 'a', 'c', 'e',
        0x12, 0x1c,
        0x0a, 0x12, 0x0a, 0x02, 't', '1', 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x32, 0x00, 0x38, 0x00, 0x42, 0x00,
        0x12, 0x00, 0x1a, 0x02, 0x0a, 0x00,
        0x1a, 0x00, 0x22, 0x00};
    expect_json(decode_ok(&kite_schema_namespace, body, sizeof body),
                "{\"kind\":\"Namespace\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"t1\"},\"spec\":{},\"status\":{}}");
}

/* `kubectl create configmap c --from-literal=a=b`: data is a map of entries {1 key, 2 value} */
Test(protobuf, configmap_map_entries) {
    static const unsigned char good[] = {
        'k', '8', 's', 0, 0x0a, 0x0f, 0x0a, 0x02, 'v', '1', 0x12, 0x09, 'C', 'o', 'n', 'f', 'i', 'g', 'M', 'a', 'p',
        0x12, 0x18,
        0x0a, 0x05, 0x0a, 0x01, 'c', 0x42, 0x00,         /* metadata {name c, creationTimestamp {}} */
        0x12, 0x06, 0x0a, 0x01, 'a', 0x12, 0x01, 'b',    /* data {a: b} */
        0x1a, 0x05, 0x0a, 0x01, 'x', 0x12, 0x00,         /* binaryData {x: ""} */
        0x20, 0x00,                                      /* immutable false: a *bool, kept */
        0x1a, 0x00, 0x22, 0x00};
    expect_json(decode_ok(&kite_schema_configmap, good, sizeof good),
                "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\"},\"data\":{\"a\":\"b\"},"
                "\"binaryData\":{\"x\":\"\"},\"immutable\":false}");
}

/* Zero scalars are dropped unless Go's JSON keeps them (no omitempty); unknown fields skipped;
 * a Time's nanoseconds dropped, a MicroTime's kept to the microsecond. */
Test(protobuf, zero_values_unknown_fields_times) {
    static const unsigned char body[] = {
        'k', '8', 's', 0, 0x0a, 0x00, 0x12, 0x28,
        0x0a, 0x00,                                             /* metadata {} */
        0x1a, 0x24,                                             /* status */
        0x42, 0x0d,                                             /* containerStatuses[0] */
        0x0a, 0x01, 'c', 0x20, 0x00, 0x28, 0x00, 0x32, 0x00, 0x3a, 0x00, 0x48, 0x00, /* name; ready, restartCount, image, imageID (no omitempty) and started (a *bool) zero: kept */
        0xf8, 0x07, 0x05,                                       /* field 127 varint: unknown, skipped */
        0x3a, 0x09, 0x08, 0x80, 0x81, 0xc8, 0xac, 0x06, 0x10, 0xe8, 0x07, /* startTime 1704067200 s + 1000 ns */
        0x82, 0x01, 0x02, 0x0a, 0x00,                           /* hostIPs [{ip ""}] (16: 0x82 0x01) */
        0x0a, 0x00,                                             /* phase "" */
        0x1a, 0x00, 0x22, 0x00};
    expect_json(decode_ok(&kite_schema_pod, body, sizeof body),
                "{\"metadata\":{},\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"ready\":false,\"restartCount\":0,"
                "\"image\":\"\",\"imageID\":\"\",\"started\":false}],\"startTime\":\"2024-01-01T00:00:00Z\",\"hostIPs\":[{\"ip\":\"\"}]}}");
}

/* ---- refused -------------------------------------------------------------------------------- */

static void expect_refused(const struct kite_schema *s, const void *p, size_t n, int code, const char *msg_part) {
    json_object *o = NULL;
    char *err = NULL;
    int r = kite_pb_decode(s, p, n, 64, &o, &err);
    cr_expect_eq(r, code, "code %d, want %d (%s)", r, code, err ? err : "");
    cr_expect(!o);
    cr_expect(err && strstr(err, msg_part), "error %s, want %s", err ? err : "(none)", msg_part);
    free(err);
}

Test(protobuf, malformed_refused) {
#define ENV "k8s\0\x0a\x00"
    expect_refused(&kite_schema_configmap, "{\"kind\":\"ConfigMap\"}", 19, -EINVAL, "k8s");
    expect_refused(&kite_schema_configmap, "k8s", 3, -EINVAL, "k8s");
    /* truncated: a length past the end, a varint cut short */
    expect_refused(&kite_schema_configmap, ENV "\x12\x05\x0a\x03", 10, -EINVAL, "unexpected EOF");
    expect_refused(&kite_schema_configmap, ENV "\x12\x02\x20\x80", 10, -EINVAL, "unexpected EOF");
    /* overlong varint: 11 bytes, and a 10th byte above 1 */
    expect_refused(&kite_schema_configmap, ENV "\x12\x0c\x20\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", 20, -EINVAL,
                   "integer overflow");
    expect_refused(&kite_schema_configmap, ENV "\x12\x0b\x20\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 19, -EINVAL,
                   "integer overflow");
    /* wrong wire type: immutable (bool) as a string, metadata as a varint, a string as fixed32 */
    expect_refused(&kite_schema_configmap, ENV "\x12\x03\x22\x01x", 11, -EINVAL, "wrong wireType = 2 for field immutable");
    expect_refused(&kite_schema_configmap, ENV "\x12\x02\x08\x01", 10, -EINVAL, "wrong wireType = 0 for field metadata");
    expect_refused(&kite_schema_configmap, ENV "\x12\x07\x0a\x05\x0d\x01\x02\x03\x04", 15, -EINVAL,
                   "wrong wireType = 5 for field name");
    /* groups and tag 0 */
    expect_refused(&kite_schema_configmap, ENV "\x12\x01\x7b", 9, -EINVAL, "illegal wireType 3");
    expect_refused(&kite_schema_configmap, ENV "\x12\x02\x00\x00", 10, -EINVAL, "illegal tag 0");
    /* a map key holding NUL; FieldsV1 that is not JSON; a time past year 9999 */
    expect_refused(&kite_schema_configmap, ENV "\x12\x07\x12\x05\x0a\x03" "a\0b", 15, -EINVAL, "NUL");
    expect_refused(&kite_schema_configmap, ENV "\x12\x0a\x0a\x08\x8a\x01\x05\x3a\x03\x0a\x01{", 18, -EINVAL, "valid JSON");
    expect_refused(&kite_schema_configmap, ENV "\x12\x0e\x0a\x0c\x42\x0a\x08\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 22,
                   -EINVAL, "out of range");
    /* what kite cannot read: a compressed envelope, an untyped field (a node's configSource) */
    expect_refused(&kite_schema_configmap, "k8s\0\x12\x00\x1a\x04gzip", 12, -ENOTSUP, "gzip");
    expect_refused(&kite_schema_node, ENV "\x12\x04\x12\x02\x32\x00", 12, -ENOTSUP, "configSource");
#undef ENV
}

/* Nesting deeper than the limit is refused (a Pod's containerStatuses.state.running is 5 deep). */
Test(protobuf, depth_limit) {
    json_object *pod = parse("{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"status\":{\"containerStatuses\":[{\"name\":\"c\","
                             "\"state\":{\"running\":{\"startedAt\":\"2024-01-01T00:00:00Z\"}}}]}}");
    struct kite_buf b = {0};
    cr_assert_eq(kite_pb_encode_any(pod, &b), 0);
    json_object *o = NULL;
    char *err = NULL;
    cr_expect_eq(kite_pb_decode(&kite_schema_pod, b.p, b.len, 3, &o, &err), -EINVAL);
    cr_expect(err && strstr(err, "deeper than 3"), "%s", err ? err : "");
    free(err);
    err = NULL;
    cr_expect_eq(kite_pb_decode(&kite_schema_pod, b.p, b.len, 5, &o, &err), 0, "%s", err ? err : "");
    json_object_put(o);
    kite_buf_release(&b);
    json_object_put(pod);
}

/* What protobuf cannot carry through kite's schemas is not encoded: the caller answers JSON. */
Test(protobuf, encode_refuses_untyped) {
    static const char *const bodies[] = {
        "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"extra\":1}",
        "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"spec\":{\"volumes\":[{\"name\":\"v\",\"emptyDir\":{\"bogus\":1}}]}}",
        "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"spec\":{\"configSource\":{}}}",
        "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"data\":{\"a\":1}}",
        "{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/v1\"}",
        "{\"kind\":\"Widget\",\"apiVersion\":\"example.com/v1\"}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        json_object *o = parse(bodies[i]);
        struct kite_buf b = {0};
        cr_expect_eq(kite_pb_encode_any(o, &b), -ENOTSUP, "%s", bodies[i]);
        cr_expect_eq(b.len, 0);
        kite_buf_release(&b);
        json_object_put(o);
    }
}

/* A double field holding NaN or an infinity (JSON has neither) is refused, not stored: found by
 * fuzz_protobuf (NaN decoded, then compared unequal to itself after a round trip). */
Test(protobuf, non_finite_double_refused) {
    static const struct kite_schema_field fields[] = {{"f", &kite_schema_float, 1, 0}, {NULL, NULL, 0, 0}};
    static const struct kite_schema s = {.type = KITE_SCHEMA_OBJECT, .go_type = "F", .fields = fields};
    static const char nan_body[] = "k8s\0\x12\x09\x09\x00\x00\x00\x00\x00\x00\xf8\x7f";
    static const char inf_body[] = "k8s\0\x12\x09\x09\x00\x00\x00\x00\x00\x00\xf0\xff";
    static const char ok_body[] = "k8s\0\x12\x09\x09\x00\x00\x00\x00\x00\x00\xf8\x3f";
    expect_refused(&s, nan_body, sizeof nan_body - 1, -EINVAL, "unsupported value");
    expect_refused(&s, inf_body, sizeof inf_body - 1, -EINVAL, "unsupported value");
    expect_json(decode_ok(&s, ok_body, sizeof ok_body - 1), "{\"f\":1.5}");
}

/* An EphemeralContainer embeds EphemeralContainerCommon (Container's fields and numbers): inline
 * in JSON, field 1 of its own in protobuf, then targetContainerName (2). A pod with one is read
 * by protobuf clients (kubectl debug watches the pod so). */
Test(protobuf, ephemeral_container_inline_struct) {
    const char *json = "{" META("Pod", "v1") "," OMETA ",\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"busybox\"}],"
                       "\"ephemeralContainers\":[{\"name\":\"dbg\",\"image\":\"busybox\",\"targetContainerName\":\"app\"}]}}";
    round_trip(json);
    json_object *in = parse(json);
    struct kite_buf b = {0};
    cr_assert_eq(kite_pb_encode_any(in, &b), 0);
    /* PodSpec field 34 (tag 0x92 0x02), {1: {1 "dbg", 2 "busybox"}, 2 "app"} */
    static const unsigned char want[] = {0x92, 0x02, 0x15, 0x0a, 0x0e, 0x0a, 0x03, 'd', 'b', 'g', 0x12, 0x07, 'b', 'u', 's',
                                         'y', 'b', 'o', 'x', 0x12, 0x03, 'a', 'p', 'p'};
    cr_expect(memmem(b.p, b.len, want, sizeof want) != NULL, "the EphemeralContainer's bytes");
    kite_buf_release(&b);
    json_object_put(in);
}

/* A Volume embeds its VolumeSource (field 2, inline in JSON): a hostPath volume (kubectl debug
 * node's /host) passes both ways; the other sources are not transcribed. */
Test(protobuf, volume_source_inline_host_path) {
    round_trip("{" META("Pod", "v1") "," OMETA ",\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\","
               "\"volumeMounts\":[{\"name\":\"host-root\",\"mountPath\":\"/host\"}]}],"
               "\"volumes\":[{\"name\":\"host-root\",\"hostPath\":{\"path\":\"/\",\"type\":\"\"}}],\"hostPID\":true}}");
    json_object *in = parse("{" META("Pod", "v1") "," OMETA ",\"spec\":{\"containers\":[{\"name\":\"c\"}],"
                            "\"volumes\":[{\"name\":\"h\",\"hostPath\":{\"path\":\"/\"}}]}}");
    struct kite_buf b = {0};
    cr_assert_eq(kite_pb_encode_any(in, &b), 0);
    /* PodSpec field 1: {1 "h", 2 {1 {1 "/"}}} */
    static const unsigned char want[] = {0x0a, 0x0a, 0x0a, 0x01, 'h', 0x12, 0x05, 0x0a, 0x03, 0x0a, 0x01, '/'};
    cr_expect(memmem(b.p, b.len, want, sizeof want) != NULL, "the Volume's bytes");
    kite_buf_release(&b);
    json_object_put(in);
}

/* A pod with every common field of k8s.io/api v0.32's Pod (probes, lifecycle hooks, env sources,
 * affinity, spread constraints, every common volume source, a full status) goes through protobuf
 * without loss: what kubectl debug and other protobuf watchers read is what JSON readers read.
 * Before the schema was complete, such a pod could not be encoded and watchers asking for
 * protobuf got JSON they could not decode ("unable to decode watch event"). */
Test(protobuf, full_pod_round_trips) {
#define PROBE(h) "{" h ",\"initialDelaySeconds\":1,\"timeoutSeconds\":2,\"periodSeconds\":3,\"successThreshold\":1," \
                 "\"failureThreshold\":4,\"terminationGracePeriodSeconds\":0}"
    const char *json =
        "{" META("Pod", "v1") "," OMETA ",\"spec\":{"
        "\"volumes\":["
        "{\"name\":\"hp\",\"hostPath\":{\"path\":\"/srv\",\"type\":\"Directory\"}},"
        "{\"name\":\"ed\",\"emptyDir\":{\"medium\":\"Memory\",\"sizeLimit\":\"64Mi\"}},"
        "{\"name\":\"ed0\",\"emptyDir\":{}},"
        "{\"name\":\"sec\",\"secret\":{\"secretName\":\"s\",\"items\":[{\"key\":\"k\",\"path\":\"p\",\"mode\":256}],"
        "\"defaultMode\":420,\"optional\":false}},"
        "{\"name\":\"cm\",\"configMap\":{\"name\":\"c\",\"items\":[{\"key\":\"k\",\"path\":\"p\"}],\"defaultMode\":292,"
        "\"optional\":true}},"
        "{\"name\":\"dapi\",\"downwardAPI\":{\"items\":[{\"path\":\"labels\",\"fieldRef\":{\"apiVersion\":\"v1\","
        "\"fieldPath\":\"metadata.labels\"}},{\"path\":\"cpu\",\"resourceFieldRef\":{\"containerName\":\"app\","
        "\"resource\":\"limits.cpu\",\"divisor\":\"1m\"},\"mode\":384}],\"defaultMode\":420}},"
        "{\"name\":\"kube-api-access-x\",\"projected\":{\"sources\":[{\"serviceAccountToken\":{\"expirationSeconds\":3607,"
        "\"path\":\"token\"}},{\"configMap\":{\"name\":\"kube-root-ca.crt\",\"items\":[{\"key\":\"ca.crt\",\"path\":\"ca.crt\"}]}},"
        "{\"downwardAPI\":{\"items\":[{\"path\":\"namespace\",\"fieldRef\":{\"apiVersion\":\"v1\","
        "\"fieldPath\":\"metadata.namespace\"}}]}},{\"secret\":{\"name\":\"s2\",\"optional\":true}},"
        "{\"clusterTrustBundle\":{\"signerName\":\"example.com/s\",\"labelSelector\":{\"matchLabels\":{\"a\":\"b\"}},"
        "\"path\":\"b.pem\"}}],\"defaultMode\":420}},"
        "{\"name\":\"pvc\",\"persistentVolumeClaim\":{\"claimName\":\"data\",\"readOnly\":true}},"
        "{\"name\":\"nfs\",\"nfs\":{\"server\":\"10.0.0.1\",\"path\":\"/exports\",\"readOnly\":true}},"
        "{\"name\":\"csi\",\"csi\":{\"driver\":\"d.example.com\",\"readOnly\":true,\"volumeAttributes\":{\"k\":\"v\"},"
        "\"nodePublishSecretRef\":{\"name\":\"ns\"}}},"
        "{\"name\":\"eph\",\"ephemeral\":{\"volumeClaimTemplate\":{\"metadata\":{\"labels\":{\"a\":\"b\"}},"
        "\"spec\":{\"accessModes\":[\"ReadWriteOnce\"],\"resources\":{\"requests\":{\"storage\":\"1Gi\"}},"
        "\"storageClassName\":\"fast\",\"volumeMode\":\"Filesystem\"}}}},"
        "{\"name\":\"img\",\"image\":{\"reference\":\"busybox\",\"pullPolicy\":\"IfNotPresent\"}},"
        "{\"name\":\"git\",\"gitRepo\":{\"repository\":\"https://example.com/r.git\",\"revision\":\"main\"}},"
        "{\"name\":\"iscsi\",\"iscsi\":{\"targetPortal\":\"10.0.0.2:3260\",\"iqn\":\"iqn.2001-04.com.example:x\",\"lun\":0,"
        "\"fsType\":\"ext4\",\"chapAuthSession\":true,\"secretRef\":{\"name\":\"chap\"}}},"
        "{\"name\":\"rbd\",\"rbd\":{\"monitors\":[\"10.0.0.3:6789\"],\"image\":\"i\",\"pool\":\"rbd\"}},"
        "{\"name\":\"fc\",\"fc\":{\"targetWWNs\":[\"50060e801049cfd1\"],\"lun\":0}},"
        "{\"name\":\"azd\",\"azureDisk\":{\"diskName\":\"d\",\"diskURI\":\"u\",\"cachingMode\":\"ReadWrite\",\"readOnly\":false}}"
        "],"
        "\"initContainers\":[{\"name\":\"init\",\"image\":\"busybox\",\"command\":[\"true\"],\"restartPolicy\":\"Always\","
        "\"startupProbe\":" PROBE("\"grpc\":{\"port\":9090,\"service\":\"\"}") "}],"
        "\"containers\":[{\"name\":\"app\",\"image\":\"busybox\",\"command\":[\"sh\"],\"args\":[\"-c\",\"sleep 1\"],"
        "\"workingDir\":\"/w\",\"ports\":[{\"name\":\"http\",\"containerPort\":8080,\"protocol\":\"TCP\"}],"
        "\"envFrom\":[{\"prefix\":\"P_\",\"configMapRef\":{\"name\":\"c\",\"optional\":true}},{\"secretRef\":{\"name\":\"s\"}}],"
        "\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"POD\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\","
        "\"fieldPath\":\"metadata.name\"}}},{\"name\":\"MEM\",\"valueFrom\":{\"resourceFieldRef\":{\"resource\":\"limits.memory\"}}},"
        "{\"name\":\"K\",\"valueFrom\":{\"configMapKeyRef\":{\"name\":\"c\",\"key\":\"k\",\"optional\":false}}},"
        "{\"name\":\"S\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\",\"key\":\"k\"}}}],"
        "\"resources\":{\"limits\":{\"cpu\":\"500m\",\"memory\":\"128Mi\"},\"requests\":{\"cpu\":\"100m\"},"
        "\"claims\":[{\"name\":\"gpu\",\"request\":\"r\"}]},"
        "\"resizePolicy\":[{\"resourceName\":\"cpu\",\"restartPolicy\":\"NotRequired\"}],"
        "\"volumeMounts\":[{\"name\":\"ed\",\"mountPath\":\"/cache\",\"readOnly\":true,\"subPath\":\"x\"}],"
        "\"volumeDevices\":[{\"name\":\"blk\",\"devicePath\":\"/dev/xvda\"}],"
        "\"livenessProbe\":" PROBE("\"httpGet\":{\"path\":\"/healthz\",\"port\":\"http\",\"host\":\"h\",\"scheme\":\"HTTP\","
                                   "\"httpHeaders\":[{\"name\":\"X\",\"value\":\"y\"}]}") ","
        "\"readinessProbe\":" PROBE("\"exec\":{\"command\":[\"cat\",\"/tmp/ready\"]}") ","
        "\"startupProbe\":" PROBE("\"tcpSocket\":{\"port\":8080}") ","
        "\"lifecycle\":{\"postStart\":{\"exec\":{\"command\":[\"true\"]}},\"preStop\":{\"sleep\":{\"seconds\":5}}},"
        "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
        "\"imagePullPolicy\":\"IfNotPresent\",\"securityContext\":{\"capabilities\":{\"drop\":[\"ALL\"]},"
        "\"privileged\":false,\"runAsUser\":1000,\"runAsNonRoot\":true,\"readOnlyRootFilesystem\":true,"
        "\"allowPrivilegeEscalation\":false,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},"
        "\"stdin\":true,\"tty\":true}],"
        "\"ephemeralContainers\":[{\"name\":\"dbg\",\"image\":\"busybox\",\"targetContainerName\":\"app\",\"stdin\":true,"
        "\"tty\":true,\"securityContext\":{\"capabilities\":{\"add\":[\"SYS_PTRACE\"]}}}],"
        "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"activeDeadlineSeconds\":600,"
        "\"dnsPolicy\":\"ClusterFirst\",\"nodeSelector\":{\"disk\":\"ssd\"},\"serviceAccountName\":\"default\","
        "\"serviceAccount\":\"default\",\"automountServiceAccountToken\":true,\"nodeName\":\"n1\",\"hostNetwork\":true,"
        "\"shareProcessNamespace\":false,\"securityContext\":{\"runAsUser\":1000,\"runAsGroup\":3000,\"fsGroup\":2000,"
        "\"supplementalGroups\":[4000],\"sysctls\":[{\"name\":\"net.ipv4.ip_local_port_range\",\"value\":\"1024 65535\"}]},"
        "\"imagePullSecrets\":[{\"name\":\"reg\"}],\"hostname\":\"h\",\"subdomain\":\"s\","
        "\"affinity\":{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
        "[{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}],\"matchFields\":"
        "[{\"key\":\"metadata.name\",\"operator\":\"NotIn\",\"values\":[\"n9\"]}]}]},"
        "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":10,\"preference\":{\"matchExpressions\":"
        "[{\"key\":\"gpu\",\"operator\":\"Exists\"}]}}]},"
        "\"podAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":[{\"labelSelector\":{\"matchExpressions\":"
        "[{\"key\":\"app\",\"operator\":\"In\",\"values\":[\"db\"]}]},\"topologyKey\":\"kubernetes.io/hostname\","
        "\"namespaces\":[\"x\"],\"matchLabelKeys\":[\"pod-template-hash\"]}]},"
        "\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":100,\"podAffinityTerm\":"
        "{\"labelSelector\":{\"matchLabels\":{\"app\":\"web\"}},\"namespaceSelector\":{},\"topologyKey\":\"zone\"}}]}},"
        "\"schedulerName\":\"default-scheduler\",\"tolerations\":[{\"key\":\"k\",\"operator\":\"Exists\","
        "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}],\"hostAliases\":[{\"ip\":\"1.2.3.4\",\"hostnames\":[\"a\"]}],"
        "\"priorityClassName\":\"high\",\"priority\":1000,\"dnsConfig\":{\"nameservers\":[\"1.1.1.1\"],\"searches\":[\"x.local\"],"
        "\"options\":[{\"name\":\"ndots\",\"value\":\"2\"},{\"name\":\"edns0\"}]},"
        "\"readinessGates\":[{\"conditionType\":\"example.com/ready\"}],\"runtimeClassName\":\"runc\","
        "\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\",\"overhead\":{\"cpu\":\"10m\"},"
        "\"topologySpreadConstraints\":[{\"maxSkew\":1,\"topologyKey\":\"zone\",\"whenUnsatisfiable\":\"DoNotSchedule\","
        "\"labelSelector\":{\"matchLabels\":{\"app\":\"web\"}},\"minDomains\":2,\"nodeAffinityPolicy\":\"Honor\","
        "\"nodeTaintsPolicy\":\"Ignore\",\"matchLabelKeys\":[\"pod-template-hash\"]}],"
        "\"setHostnameAsFQDN\":false,\"os\":{\"name\":\"linux\"},\"hostUsers\":true,"
        "\"schedulingGates\":[{\"name\":\"example.com/gate\"}],"
        "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"t\"}],"
        "\"resources\":{\"limits\":{\"cpu\":\"1\"}}},"
        "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\","
        "\"lastTransitionTime\":\"2024-05-06T07:08:09Z\"}],\"hostIP\":\"10.0.0.9\","
        "\"hostIPs\":[{\"ip\":\"10.0.0.9\"}],\"podIP\":\"10.244.0.5\",\"podIPs\":[{\"ip\":\"10.244.0.5\"}],"
        "\"startTime\":\"2024-05-06T07:08:09Z\",\"containerStatuses\":[{\"name\":\"app\",\"state\":{\"running\":"
        "{\"startedAt\":\"2024-05-06T07:08:10Z\"}},\"lastState\":{\"terminated\":{\"exitCode\":137,\"reason\":\"OOMKilled\","
        "\"startedAt\":\"2024-05-06T07:00:00Z\",\"finishedAt\":\"2024-05-06T07:08:00Z\",\"containerID\":\"runc://a\"}},"
        "\"ready\":true,\"restartCount\":1,\"image\":\"busybox\",\"imageID\":\"sha256:x\",\"containerID\":\"runc://b\","
        "\"started\":true,\"volumeMounts\":[{\"name\":\"ed\",\"mountPath\":\"/cache\",\"readOnly\":true,"
        "\"recursiveReadOnly\":\"Disabled\"}],\"user\":{\"linux\":{\"uid\":1000,\"gid\":3000,\"supplementalGroups\":[3000,4000]}},"
        "\"allocatedResourcesStatus\":[{\"name\":\"claim:gpu\",\"resources\":[{\"resourceID\":\"r1\",\"health\":\"Healthy\"}]}]}],"
        "\"qosClass\":\"Burstable\",\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gpu-abc\"}]}}";
#undef PROBE
    round_trip(json);
}
