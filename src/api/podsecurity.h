/* The Pod Security Standards, as upstream's k8s.io/pod-security-admission policy and api
 * packages evaluate them: levels (privileged, baseline, restricted) at a version ("latest" or
 * "v1.N"), the checks of each level with upstream's check ids, reasons and messages, and the
 * namespace labels that choose a policy. Pure functions over a pod's JSON (metadata, spec); the
 * admission plugin (src/apiserver/admission_podsecurity.c) decides what to do with the answers.
 *
 * "latest" means the checks of KITE_PSA_LATEST_MINOR (the Kubernetes release kite serves): a
 * version newer than that is evaluated as it, an older one with the checks as they were then
 * (upstream's registry, for the checks that changed: allowPrivilegeEscalation from 1.8,
 * capabilities_restricted from 1.22, runAsUser from 1.23, the seccomp annotations before 1.19,
 * Windows pods exempt from three restricted checks from 1.25, seLinuxOptions' type
 * container_engine_t from 1.31, the sysctls of 1.27, 1.29 and 1.32). */
#pragma once
#include "api/validation.h"

#include <json-c/json.h>
#include <stdbool.h>

#define KITE_PSA_LATEST_MINOR 32 /* the release whose checks "latest" runs (kite serves 1.32) */
#define KITE_PSA_LABEL_PREFIX "pod-security.kubernetes.io/"

enum kite_psa_level { KITE_PSA_PRIVILEGED, KITE_PSA_BASELINE, KITE_PSA_RESTRICTED };

/* A level at a version: latest, or v1.<minor>. */
struct kite_psa_lv {
    enum kite_psa_level level;
    bool latest;
    int minor;
};
/* What a namespace asks for in each mode. */
struct kite_psa_policy {
    struct kite_psa_lv enforce, audit, warn;
};

/* "privileged", "baseline", "restricted": 0; else -EINVAL. */
int kite_psa_parse_level(const char *s, enum kite_psa_level *ret);
/* "latest" or "v1.N" (N without leading zeros): 0; else -EINVAL. */
int kite_psa_parse_version(const char *s, struct kite_psa_lv *ret);
/* "LEVEL" or "LEVEL:VERSION" (the --pod-security-default flag): 0; else -EINVAL. */
int kite_psa_parse_lv(const char *s, struct kite_psa_lv *ret);
const char *kite_psa_level_name(enum kite_psa_level l);
/* "baseline:latest", "restricted:v1.30" (upstream's LevelVersion.String()). */
#define KITE_PSA_LV_MAX 48
void kite_psa_lv_format(const struct kite_psa_lv *lv, char out[KITE_PSA_LV_MAX]);
/* Same level, and for baseline and restricted the same version (LevelVersion.Equivalent). */
bool kite_psa_lv_equivalent(const struct kite_psa_lv *a, const struct kite_psa_lv *b);

/* The policy of a namespace with these labels (borrowed; NULL = none) over the cluster's
 * defaults, as api.PolicyToEvaluate: each label present overrides its default; an invalid
 * enforce level enforces restricted, an invalid audit or warn level is privileged (fail
 * open), an invalid version is latest; without a warn label, warn is raised to enforce's
 * level (and version). Each invalid value adds a FieldValueInvalid cause to errs (may be NULL)
 * at `metadata.labels[pod-security.kubernetes.io/...]` with upstream's message. */
void kite_psa_policy_from_labels(json_object *labels, const struct kite_psa_policy *defaults,
                                 struct kite_psa_policy *ret, struct kite_causes *errs);

/* Evaluates a pod (its metadata and spec; borrowed, NULL = empty) against lv. NULL when
 * allowed; else the malloc'ed aggregate of the failed checks, in upstream's order (baseline
 * checks by id, then restricted ones), as AggregateCheckResult.ForbiddenDetail() prints it:
 * `privileged (container "c" must not set securityContext.privileged=true), host namespaces
 * (hostNetwork=true)`. ret_reasons (may be NULL) gets the reasons alone, ", "-joined. */
char *kite_psa_evaluate(const struct kite_psa_lv *lv, json_object *pod_meta, json_object *pod_spec,
                        char **ret_reasons);
