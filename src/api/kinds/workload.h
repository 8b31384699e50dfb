/* What the workload kinds (apps/v1 ReplicaSet, Deployment; later Job, DaemonSet) share: the
 * pod template (core/v1 PodTemplateSpec, whose spec is the Pod's schema and defaults, in
 * pod.c), the label selector, the checks of a selector against its template, the
 * autoscaling/v1 Scale view of /scale, and the Containers, Images and Selector columns. */
#pragma once
#include "api/kinds/kind.h"

extern const struct kite_schema kite_schema_pod_template_spec, kite_schema_label_selector;
/* batch/v1 JobSpec (job.c) */
extern const struct kite_schema kite_schema_job_spec;

/* The Pod's spec defaults on a template (pod.c). */
void kite_pod_template_defaults(json_object *tmpl);
/* The Pod's spec checks on a template, fields under path (pod.c). */
void kite_pod_template_validate(json_object *tmpl, const char *path, struct kite_causes *c);

/* A metav1.LabelSelector (JSON; borrowed) matches labels (may be NULL). NULL selects nothing. */
bool kite_workload_selector_matches(json_object *sel, json_object *labels);
/* The selector as labels.Selector's String() prints it ("app=web,tier in (a,b)"). */
void kite_workload_selector_string(json_object *sel, struct kite_buf *out);

/* ValidateReplicaSetSpec / ValidateDeploymentSpec's shared part (replicas, minReadySeconds,
 * selector, template with restartPolicy Always) and, on update (old != NULL), the immutable
 * selector. empty_msg: what an empty selector is told (upstream's words differ per kind). */
void kite_workload_validate(json_object *obj, json_object *old, const char *empty_msg, struct kite_causes *c);

/* /scale (autoscaling/v1 Scale): spec.replicas, status.replicas and the selector; a row of a
 * kind's subresources. */
json_object *kite_workload_scale_view(json_object *obj);
void kite_workload_scale_apply(json_object *obj, json_object *view);
#define KITE_WORKLOAD_SCALE                                                                              \
    {.name = "scale", .field = "spec", .body_group = "autoscaling", .body_version = "v1", .body_kind = "Scale", \
     .view = kite_workload_scale_view, .apply = kite_workload_scale_apply}

/* Wide columns: the template's container names and images, and the selector. */
json_object *kite_workload_cell_containers(const struct kite_table_row *r);
json_object *kite_workload_cell_images(const struct kite_table_row *r);
json_object *kite_workload_cell_selector(const struct kite_table_row *r);

/* strategic-merge rules: the template's are the Pod's under spec.template */
#define TEMPLATE_RULES                                                                   \
    {"spec.template.metadata.finalizers", NULL, KITE_SMP_MERGE_PRIMITIVES, NULL},              \
    {"spec.template.metadata.ownerReferences", "uid", KITE_SMP_MERGE, NULL},                   \
    {"spec.template.spec.containers", "name", KITE_SMP_MERGE, NULL},                           \
    {"spec.template.spec.containers.ports", "containerPort", KITE_SMP_MERGE, "containerPort,protocol=TCP"}, \
    {"spec.template.spec.containers.env", "name", KITE_SMP_MERGE, NULL},                       \
    {"spec.template.spec.containers.volumeMounts", "mountPath", KITE_SMP_MERGE, NULL},         \
    {"spec.template.spec.containers.volumeDevices", "devicePath", KITE_SMP_MERGE, NULL},       \
    {"spec.template.spec.initContainers", "name", KITE_SMP_MERGE, NULL},                       \
    {"spec.template.spec.initContainers.ports", "containerPort", KITE_SMP_MERGE, "containerPort,protocol=TCP"}, \
    {"spec.template.spec.initContainers.env", "name", KITE_SMP_MERGE, NULL},                   \
    {"spec.template.spec.initContainers.volumeMounts", "mountPath", KITE_SMP_MERGE, NULL},     \
    {"spec.template.spec.volumes", "name", KITE_SMP_MERGE | KITE_SMP_RETAIN_KEYS, NULL},       \
    {"spec.template.spec.imagePullSecrets", "name", KITE_SMP_MERGE, NULL},                     \
    {"spec.template.spec.hostAliases", "ip", KITE_SMP_MERGE, NULL},                            \
    {"spec.template.spec.topologySpreadConstraints", "topologyKey", KITE_SMP_MERGE, NULL},     \
    {"status.conditions", "type", KITE_SMP_MERGE, NULL}

