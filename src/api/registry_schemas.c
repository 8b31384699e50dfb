/* The typed schemas of the served kinds (schema.h), transcribed from the Go types of
 * k8s.io/api (core/v1, coordination/v1, events/v1) and apimachinery's ObjectMeta: every field
 * whose type a client relies on. Parts kite does not interpret and that have many shapes
 * (probes, affinity, volume sources, security contexts) are RAW: only their strings are
 * checked. Go struct names are the ones Go's decoder prints in its errors. */
#include "api/schema.h"

#define S kite_schema_string
#define I32 kite_schema_int32
#define I64 kite_schema_int64
#define B kite_schema_bool
#define Q kite_schema_quantity
#define T kite_schema_time
#define MT kite_schema_microtime
#define RAW kite_schema_raw
#define SLIST kite_schema_string_list
#define SMAP kite_schema_string_map
#define RLIST kite_schema_resource_list
#define F(n, s) {n, &s}

/* An object (struct) schema `name` with Go name `go` and the given fields. */
#define OBJ(name, go, ...)                                                         \
    static const struct kite_schema_field name##_fields[] = {__VA_ARGS__, {NULL, NULL}}; \
    static const struct kite_schema name = {KITE_SCHEMA_OBJECT, go, name##_fields, NULL}
/* A kind's root schema, named in schema.h. */
#define ROOT(name, go, ...)                                                        \
    static const struct kite_schema_field name##_fields[] = {__VA_ARGS__, {NULL, NULL}}; \
    const struct kite_schema name = {KITE_SCHEMA_OBJECT, go, name##_fields, NULL}
/* A list schema `name` of elem, Go name go (NULL: "[]" + elem's). */
#define LIST(name, go, elem) static const struct kite_schema name = {KITE_SCHEMA_LIST, go, NULL, &elem}

/* ---- metav1.ObjectMeta --------------------------------------------------------------------- */
OBJ(owner_ref, "OwnerReference", F("apiVersion", S), F("kind", S), F("name", S), F("uid", S),
    F("controller", B), F("blockOwnerDeletion", B));
LIST(owner_refs, NULL, owner_ref);
OBJ(managed_entry, "ManagedFieldsEntry", F("manager", S), F("operation", S), F("apiVersion", S), F("time", T),
    F("fieldsType", S), F("fieldsV1", RAW), F("subresource", S));
LIST(managed_fields, NULL, managed_entry);
OBJ(object_meta, "ObjectMeta", F("name", S), F("generateName", S), F("namespace", S), F("selfLink", S),
    F("uid", S), F("resourceVersion", S), F("generation", I64), F("creationTimestamp", T),
    F("deletionTimestamp", T), F("deletionGracePeriodSeconds", I64), F("labels", SMAP), F("annotations", SMAP),
    F("ownerReferences", owner_refs), F("finalizers", SLIST), F("managedFields", managed_fields));

#define TYPE_META F("kind", S), F("apiVersion", S), F("metadata", object_meta)

OBJ(object_ref, "ObjectReference", F("kind", S), F("namespace", S), F("name", S), F("uid", S),
    F("apiVersion", S), F("resourceVersion", S), F("fieldPath", S));

/* ---- core/v1 Namespace --------------------------------------------------------------------- */
LIST(ns_finalizers, "[]v1.FinalizerName", S);
OBJ(ns_spec, "NamespaceSpec", F("finalizers", ns_finalizers));
OBJ(ns_condition, "NamespaceCondition", F("type", S), F("status", S), F("lastTransitionTime", T), F("reason", S),
    F("message", S));
LIST(ns_conditions, NULL, ns_condition);
OBJ(ns_status, "NamespaceStatus", F("phase", S), F("conditions", ns_conditions));
ROOT(kite_schema_namespace, "Namespace", TYPE_META, F("spec", ns_spec), F("status", ns_status));

/* ---- core/v1 Node ---------------------------------------------------------------------------- */
OBJ(taint, "Taint", F("key", S), F("value", S), F("effect", S), F("timeAdded", T));
LIST(taints, NULL, taint);
OBJ(node_spec, "NodeSpec", F("podCIDR", S), F("podCIDRs", SLIST), F("providerID", S), F("unschedulable", B),
    F("taints", taints), F("configSource", RAW), F("externalID", S));
OBJ(node_condition, "NodeCondition", F("type", S), F("status", S), F("lastHeartbeatTime", T),
    F("lastTransitionTime", T), F("reason", S), F("message", S));
LIST(node_conditions, NULL, node_condition);
OBJ(node_address, "NodeAddress", F("type", S), F("address", S));
LIST(node_addresses, NULL, node_address);
OBJ(daemon_endpoint, "DaemonEndpoint", F("Port", I32));
OBJ(daemon_endpoints, "NodeDaemonEndpoints", F("kubeletEndpoint", daemon_endpoint));
OBJ(node_swap, "NodeSwapStatus", F("capacity", I64));
OBJ(node_info, "NodeSystemInfo", F("machineID", S), F("systemUUID", S), F("bootID", S), F("kernelVersion", S),
    F("osImage", S), F("containerRuntimeVersion", S), F("kubeletVersion", S), F("kubeProxyVersion", S),
    F("operatingSystem", S), F("architecture", S), F("swap", node_swap));
OBJ(container_image, "ContainerImage", F("names", SLIST), F("sizeBytes", I64));
LIST(container_images, NULL, container_image);
LIST(volumes_in_use, "[]v1.UniqueVolumeName", S);
OBJ(attached_volume, "AttachedVolume", F("name", S), F("devicePath", S));
LIST(attached_volumes, NULL, attached_volume);
OBJ(runtime_features, "NodeRuntimeHandlerFeatures", F("recursiveReadOnlyMounts", B), F("userNamespaces", B));
OBJ(runtime_handler, "NodeRuntimeHandler", F("name", S), F("features", runtime_features));
LIST(runtime_handlers, NULL, runtime_handler);
OBJ(node_features, "NodeFeatures", F("supplementalGroupsPolicy", B));
OBJ(node_status, "NodeStatus", F("capacity", RLIST), F("allocatable", RLIST), F("phase", S),
    F("conditions", node_conditions), F("addresses", node_addresses), F("daemonEndpoints", daemon_endpoints),
    F("nodeInfo", node_info), F("images", container_images), F("volumesInUse", volumes_in_use),
    F("volumesAttached", attached_volumes), F("config", RAW), F("runtimeHandlers", runtime_handlers),
    F("features", node_features));
ROOT(kite_schema_node, "Node", TYPE_META, F("spec", node_spec), F("status", node_status));

/* ---- core/v1 Pod ----------------------------------------------------------------------------- */
OBJ(container_port, "ContainerPort", F("name", S), F("hostPort", I32), F("containerPort", I32), F("protocol", S),
    F("hostIP", S));
LIST(container_ports, NULL, container_port);
OBJ(env_var, "EnvVar", F("name", S), F("value", S), F("valueFrom", RAW));
LIST(env_vars, NULL, env_var);
OBJ(resources, "ResourceRequirements", F("limits", RLIST), F("requests", RLIST), F("claims", RAW));
OBJ(volume_mount, "VolumeMount", F("name", S), F("readOnly", B), F("recursiveReadOnly", S), F("mountPath", S),
    F("subPath", S), F("mountPropagation", S), F("subPathExpr", S));
LIST(volume_mounts, NULL, volume_mount);
OBJ(container, "Container", F("name", S), F("image", S), F("command", SLIST), F("args", SLIST),
    F("workingDir", S), F("ports", container_ports), F("envFrom", RAW), F("env", env_vars),
    F("resources", resources), F("resizePolicy", RAW), F("restartPolicy", S), F("volumeMounts", volume_mounts),
    F("volumeDevices", RAW), F("livenessProbe", RAW), F("readinessProbe", RAW), F("startupProbe", RAW),
    F("lifecycle", RAW), F("terminationMessagePath", S), F("terminationMessagePolicy", S),
    F("imagePullPolicy", S), F("securityContext", RAW), F("stdin", B), F("stdinOnce", B), F("tty", B));
LIST(containers, NULL, container);
OBJ(volume, "Volume", F("name", S));
LIST(volumes, NULL, volume);
OBJ(local_ref, "LocalObjectReference", F("name", S));
LIST(local_refs, NULL, local_ref);
OBJ(toleration, "Toleration", F("key", S), F("operator", S), F("value", S), F("effect", S),
    F("tolerationSeconds", I64));
LIST(tolerations, NULL, toleration);
OBJ(host_alias, "HostAlias", F("ip", S), F("hostnames", SLIST));
LIST(host_aliases, NULL, host_alias);
OBJ(pod_spec, "PodSpec", F("volumes", volumes), F("initContainers", containers), F("containers", containers),
    F("ephemeralContainers", RAW), F("restartPolicy", S), F("terminationGracePeriodSeconds", I64),
    F("activeDeadlineSeconds", I64), F("dnsPolicy", S), F("nodeSelector", SMAP), F("serviceAccountName", S),
    F("serviceAccount", S), F("automountServiceAccountToken", B), F("nodeName", S), F("hostNetwork", B),
    F("hostPID", B), F("hostIPC", B), F("shareProcessNamespace", B), F("securityContext", RAW),
    F("imagePullSecrets", local_refs), F("hostname", S), F("subdomain", S), F("affinity", RAW),
    F("schedulerName", S), F("tolerations", tolerations), F("hostAliases", host_aliases),
    F("priorityClassName", S), F("priority", I32), F("dnsConfig", RAW), F("readinessGates", RAW),
    F("runtimeClassName", S), F("enableServiceLinks", B), F("preemptionPolicy", S), F("overhead", RLIST),
    F("topologySpreadConstraints", RAW), F("setHostnameAsFQDN", B), F("os", RAW), F("hostUsers", B),
    F("schedulingGates", RAW), F("resourceClaims", RAW));
OBJ(pod_condition, "PodCondition", F("type", S), F("status", S), F("lastProbeTime", T),
    F("lastTransitionTime", T), F("reason", S), F("message", S));
LIST(pod_conditions, NULL, pod_condition);
OBJ(pod_ip, "PodIP", F("ip", S));
LIST(pod_ips, NULL, pod_ip);
OBJ(host_ip, "HostIP", F("ip", S));
LIST(host_ips, NULL, host_ip);
OBJ(state_waiting, "ContainerStateWaiting", F("reason", S), F("message", S));
OBJ(state_running, "ContainerStateRunning", F("startedAt", T));
OBJ(state_terminated, "ContainerStateTerminated", F("exitCode", I32), F("signal", I32), F("reason", S),
    F("message", S), F("startedAt", T), F("finishedAt", T), F("containerID", S));
OBJ(container_state, "ContainerState", F("waiting", state_waiting), F("running", state_running),
    F("terminated", state_terminated));
OBJ(container_status, "ContainerStatus", F("name", S), F("state", container_state),
    F("lastState", container_state), F("ready", B), F("restartCount", I32), F("image", S), F("imageID", S),
    F("containerID", S), F("started", B), F("allocatedResources", RLIST), F("resources", resources));
LIST(container_statuses, NULL, container_status);
OBJ(pod_status, "PodStatus", F("phase", S), F("conditions", pod_conditions), F("message", S), F("reason", S),
    F("nominatedNodeName", S), F("hostIP", S), F("hostIPs", host_ips), F("podIP", S), F("podIPs", pod_ips),
    F("startTime", T), F("initContainerStatuses", container_statuses), F("containerStatuses", container_statuses),
    F("qosClass", S), F("ephemeralContainerStatuses", container_statuses), F("resize", S));
ROOT(kite_schema_pod, "Pod", TYPE_META, F("spec", pod_spec), F("status", pod_status));

/* ---- core/v1 Event and events.k8s.io/v1 Event ----------------------------------------------- */
OBJ(event_source, "EventSource", F("component", S), F("host", S));
OBJ(event_series, "EventSeries", F("count", I32), F("lastObservedTime", MT));
ROOT(kite_schema_event, "Event", TYPE_META, F("involvedObject", object_ref), F("reason", S), F("message", S),
    F("source", event_source), F("firstTimestamp", T), F("lastTimestamp", T), F("count", I32), F("type", S),
    F("eventTime", MT), F("series", event_series), F("action", S), F("related", object_ref),
    F("reportingComponent", S), F("reportingInstance", S));
ROOT(kite_schema_event_v1, "Event", TYPE_META, F("eventTime", MT), F("series", event_series),
    F("reportingController", S), F("reportingInstance", S), F("action", S), F("reason", S),
    F("regarding", object_ref), F("related", object_ref), F("note", S), F("type", S),
    F("deprecatedSource", event_source), F("deprecatedFirstTimestamp", T), F("deprecatedLastTimestamp", T),
    F("deprecatedCount", I32));

/* ---- coordination.k8s.io/v1 Lease ------------------------------------------------------------ */
OBJ(lease_spec, "LeaseSpec", F("holderIdentity", S), F("leaseDurationSeconds", I32), F("acquireTime", MT),
    F("renewTime", MT), F("leaseTransitions", I32), F("strategy", S), F("preferredHolder", S));
ROOT(kite_schema_lease, "Lease", TYPE_META, F("spec", lease_spec));
