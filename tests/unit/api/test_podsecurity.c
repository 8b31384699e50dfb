/* The Pod Security Standards' checks (api/podsecurity.c): each check's pass and fail with
 * upstream's exact words (k8s.io/pod-security-admission/policy, its tests' expectations), the
 * order and aggregation of several failures, versions, and the namespace labels' policy. */
#include <criterion/criterion.h>

#include "api/podsecurity.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>

/* evaluates pod (JSON: metadata and spec) at "LEVEL[:VERSION]" */
static char *eval(const char *lv_s, const char *pod) {
    struct kite_psa_lv lv;
    cr_assert_eq(kite_psa_parse_lv(lv_s, &lv), 0, "%s", lv_s);
    json_object *o = json_tokener_parse(pod);
    cr_assert_not_null(o, "bad test JSON: %s", pod);
    json_object *meta = NULL, *spec = NULL;
    json_object_object_get_ex(o, "metadata", &meta);
    json_object_object_get_ex(o, "spec", &spec);
    char *r = kite_psa_evaluate(&lv, meta, spec, NULL);
    json_object_put(o);
    return r;
}

/* a container that passes restricted */
#define OK_SC "\"securityContext\":{\"allowPrivilegeEscalation\":false,\"runAsNonRoot\":true," \
              "\"seccompProfile\":{\"type\":\"RuntimeDefault\"},\"capabilities\":{\"drop\":[\"ALL\"]}}"
#define C(name, sc) "{\"name\":\"" name "\",\"image\":\"busybox\"" sc "}"
#define POD(spec) "{\"metadata\":{\"name\":\"p\"},\"spec\":{" spec "}}"

static const struct {
    const char *lv, *pod, *want; /* want NULL: allowed */
} CASES[] = {
    /* hostProcess */
    {"baseline", POD("\"securityContext\":{\"windowsOptions\":{\"hostProcess\":true}},\"containers\":["
                     C("c", ",\"securityContext\":{\"windowsOptions\":{\"hostProcess\":true}}") "]"),
     "hostProcess (pod and container \"c\" must not set securityContext.windowsOptions.hostProcess=true)"},
    {"baseline", POD("\"containers\":[" C("c", ",\"securityContext\":{\"windowsOptions\":{\"hostProcess\":false}}") "]"),
     NULL},
    /* host namespaces */
    {"baseline", POD("\"hostIPC\":true,\"containers\":[" C("c", "") "]"), "host namespaces (hostIPC=true)"},
    {"baseline", POD("\"hostNetwork\":true,\"hostPID\":true,\"hostIPC\":true,\"containers\":[" C("c", "") "]"),
     "host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)"},
    {"baseline", POD("\"hostNetwork\":false,\"hostPID\":false,\"containers\":[" C("c", "") "]"), NULL},
    /* privileged: init containers first, then containers */
    {"baseline", POD("\"initContainers\":[" C("i", ",\"securityContext\":{\"privileged\":true}") "],\"containers\":["
                     C("c", ",\"securityContext\":{\"privileged\":true}") "]"),
     "privileged (containers \"i\", \"c\" must not set securityContext.privileged=true)"},
    {"baseline", POD("\"containers\":[" C("c", ",\"securityContext\":{\"privileged\":false}") "]"), NULL},
    {"baseline", POD("\"containers\":[" C("c", "") "],\"ephemeralContainers\":["
                     C("dbg", ",\"securityContext\":{\"privileged\":true}") "]"),
     "privileged (container \"dbg\" must not set securityContext.privileged=true)"},
    /* capabilities beyond the default set */
    {"baseline", POD("\"containers\":[" C("c", ",\"securityContext\":{\"capabilities\":{\"add\":[\"SYS_ADMIN\","
                                              "\"CHOWN\",\"NET_ADMIN\"]}}") "]"),
     "non-default capabilities (container \"c\" must not include \"NET_ADMIN\", \"SYS_ADMIN\" in "
     "securityContext.capabilities.add)"},
    {"baseline", POD("\"containers\":[" C("c", ",\"securityContext\":{\"capabilities\":{\"add\":[\"CHOWN\","
                                              "\"NET_BIND_SERVICE\",\"KILL\"]}}") "]"),
     NULL},
    /* hostPath volumes */
    {"baseline", POD("\"containers\":[" C("c", "") "],\"volumes\":[{\"name\":\"a\",\"hostPath\":{\"path\":\"/\"}},"
                     "{\"name\":\"b\",\"emptyDir\":{}},{\"name\":\"d\",\"hostPath\":{\"path\":\"/etc\"}}]"),
     "hostPath volumes (volumes \"a\", \"d\")"},
    {"baseline", POD("\"containers\":[" C("c", "") "],\"volumes\":[{\"name\":\"b\",\"emptyDir\":{}}]"), NULL},
    /* host ports: the ports sorted as strings */
    {"baseline", POD("\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":1,\"hostPort\":8080},"
                     "{\"containerPort\":2,\"hostPort\":80}]},{\"name\":\"d\",\"ports\":[{\"containerPort\":3,"
                     "\"hostPort\":80}]}]"),
     "hostPort (containers \"c\", \"d\" use hostPorts 80, 8080)"},
    {"baseline", POD("\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":1,\"hostPort\":80}]}]"),
     "hostPort (container \"c\" uses hostPort 80)"},
    {"baseline", POD("\"containers\":[{\"name\":\"c\",\"ports\":[{\"containerPort\":80,\"hostPort\":0}]}]"), NULL},
    /* AppArmor: fields and the beta annotations */
    {"baseline", POD("\"securityContext\":{\"appArmorProfile\":{\"type\":\"Unconfined\"}},\"containers\":[" C("c", "") "]"),
     "forbidden AppArmor profile (pod must not set AppArmor profile type to \"Unconfined\")"},
    {"baseline", "{\"metadata\":{\"annotations\":{\"container.apparmor.security.beta.kubernetes.io/c\":\"unconfined\"}},"
                 "\"spec\":{\"securityContext\":{\"appArmorProfile\":{\"type\":\"Unconfined\"}},\"containers\":["
                 C("c", ",\"securityContext\":{\"appArmorProfile\":{\"type\":\"Unconfined\"}}") "]}}",
     "forbidden AppArmor profiles (pod and container \"c\" and annotation must not set AppArmor profile type to "
     "\"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\")"},
    {"baseline", "{\"metadata\":{\"annotations\":{\"container.apparmor.security.beta.kubernetes.io/c\":\"runtime/default\","
                 "\"container.apparmor.security.beta.kubernetes.io/d\":\"localhost/p\"}},"
                 "\"spec\":{\"securityContext\":{\"appArmorProfile\":{\"type\":\"RuntimeDefault\"}},\"containers\":["
                 C("c", ",\"securityContext\":{\"appArmorProfile\":{\"type\":\"Localhost\",\"localhostProfile\":\"p\"}}") "]}}",
     NULL},
    /* SELinux options: types by version, user and role */
    {"baseline", POD("\"containers\":[" C("c", ",\"securityContext\":{\"seLinuxOptions\":{\"type\":\"spc_t\","
                                              "\"user\":\"u\"}}") "]"),
     "seLinuxOptions (container \"c\" set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set)"},
    {"baseline", POD("\"securityContext\":{\"seLinuxOptions\":{\"role\":\"r\",\"level\":\"s0:c1\"}},\"containers\":[" C("c", "") "]"),
     "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: role may not be set)"},
    {"baseline", POD("\"securityContext\":{\"seLinuxOptions\":{\"type\":\"container_engine_t\"}},\"containers\":[" C("c", "") "]"),
     NULL},
    {"baseline:v1.30", POD("\"securityContext\":{\"seLinuxOptions\":{\"type\":\"container_engine_t\"}},\"containers\":[" C("c", "") "]"),
     "seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"container_engine_t\")"},
    /* /proc mount type */
    {"baseline", POD("\"containers\":[" C("c", ",\"securityContext\":{\"procMount\":\"Unmasked\"}") "]"),
     "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")"},
    {"baseline", POD("\"containers\":[" C("c", ",\"securityContext\":{\"procMount\":\"Default\"}") "]"), NULL},
    /* seccomp: Unconfined refused, unset allowed at baseline; annotations before 1.19 */
    {"baseline", POD("\"securityContext\":{\"seccompProfile\":{\"type\":\"Unconfined\"}},\"containers\":["
                     C("c", ",\"securityContext\":{\"seccompProfile\":{\"type\":\"Unconfined\"}}") "]"),
     "seccompProfile (pod and container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")"},
    {"baseline", POD("\"containers\":[" C("c", ",\"securityContext\":{\"seccompProfile\":{\"type\":\"Localhost\","
                                              "\"localhostProfile\":\"x\"}}") "]"),
     NULL},
    {"baseline:v1.18", "{\"metadata\":{\"annotations\":{\"seccomp.security.alpha.kubernetes.io/pod\":\"unconfined\"}},"
                       "\"spec\":{\"containers\":[" C("c", "") "]}}",
     "seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod=\"unconfined\")"},
    /* sysctls: the safe set grows with versions */
    {"baseline", POD("\"securityContext\":{\"sysctls\":[{\"name\":\"kernel.msgmax\",\"value\":\"1\"},"
                     "{\"name\":\"net.ipv4.tcp_syncookies\",\"value\":\"1\"},{\"name\":\"net.ipv4.tcp_rmem\",\"value\":\"1\"}]},"
                     "\"containers\":[" C("c", "") "]"),
     "forbidden sysctls (kernel.msgmax)"},
    {"baseline:v1.31", POD("\"securityContext\":{\"sysctls\":[{\"name\":\"kernel.msgmax\",\"value\":\"1\"},"
                           "{\"name\":\"net.ipv4.tcp_rmem\",\"value\":\"1\"}]},\"containers\":[" C("c", "") "]"),
     "forbidden sysctls (kernel.msgmax, net.ipv4.tcp_rmem)"},
    /* privileged allows anything */
    {"privileged", POD("\"hostNetwork\":true,\"containers\":[" C("c", ",\"securityContext\":{\"privileged\":true}") "]"),
     NULL},
    /* restricted: a plain pod, and one that complies */
    {"restricted", POD("\"containers\":[" C("c", "") "]"),
     "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), "
     "unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), "
     "runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), "
     "seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or "
     "\"Localhost\")"},
    {"restricted", POD("\"containers\":[" C("c", "," OK_SC) "],\"volumes\":[{\"name\":\"a\",\"configMap\":{\"name\":\"x\"}},"
                       "{\"name\":\"b\",\"secret\":{\"secretName\":\"s\"}},{\"name\":\"e\",\"emptyDir\":{}},"
                       "{\"name\":\"p\",\"projected\":{\"sources\":[]}}]"),
     NULL},
    /* restricted volume types (replaces hostPathVolumes) */
    {"restricted", POD("\"containers\":[" C("c", "," OK_SC) "],\"volumes\":[{\"name\":\"n\",\"nfs\":{\"server\":\"s\","
                       "\"path\":\"/\"}},{\"name\":\"h\",\"hostPath\":{\"path\":\"/\"}}]"),
     "restricted volume types (volumes \"n\", \"h\" use restricted volume types \"hostPath\", \"nfs\")"},
    /* allowPrivilegeEscalation; Windows pods exempt from 1.25 */
    {"restricted", POD("\"containers\":[" C("c", ",\"securityContext\":{\"allowPrivilegeEscalation\":true,"
                       "\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"},"
                       "\"capabilities\":{\"drop\":[\"ALL\"]}}") "]"),
     "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)"},
    {"restricted", POD("\"os\":{\"name\":\"windows\"},\"securityContext\":{\"runAsNonRoot\":true},\"containers\":[" C("c", "") "]"),
     NULL},
    {"restricted:v1.24", POD("\"os\":{\"name\":\"windows\"},\"securityContext\":{\"runAsNonRoot\":true},\"containers\":["
                             C("c", ",\"securityContext\":{\"allowPrivilegeEscalation\":false,\"seccompProfile\":"
                               "{\"type\":\"RuntimeDefault\"}}") "]"),
     "unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"])"},
    /* runAsNonRoot */
    {"restricted", POD("\"securityContext\":{\"runAsNonRoot\":false},\"containers\":[" C("c", "," OK_SC) "]"),
     "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)"},
    /* runAsUser: 0 refused from 1.23 */
    {"restricted", POD("\"securityContext\":{\"runAsUser\":0},\"containers\":[" C("c", "," OK_SC) "]"),
     "runAsUser=0 (pod must not set runAsUser=0)"},
    {"restricted:v1.22", POD("\"securityContext\":{\"runAsUser\":0},\"containers\":[" C("c", "," OK_SC) "]"), NULL},
    {"restricted", POD("\"securityContext\":{\"runAsUser\":1000},\"containers\":[" C("c", "," OK_SC) "]"), NULL},
    /* capabilities: drop ALL, add only NET_BIND_SERVICE */
    {"restricted", POD("\"containers\":[" C("c", ",\"securityContext\":{\"allowPrivilegeEscalation\":false,"
                       "\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"},\"capabilities\":"
                       "{\"drop\":[\"ALL\"],\"add\":[\"NET_BIND_SERVICE\",\"SYS_TIME\"]}}") "]"),
     "unrestricted capabilities (container \"c\" must not include \"SYS_TIME\" in securityContext.capabilities.add)"},
    {"restricted", POD("\"containers\":[" C("c", ",\"securityContext\":{\"allowPrivilegeEscalation\":false,"
                       "\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"},\"capabilities\":"
                       "{\"drop\":[\"NET_RAW\"],\"add\":[\"SYS_TIME\"]}}") "]"),
     "unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]; container \"c\" "
     "must not include \"SYS_TIME\" in securityContext.capabilities.add)"},
    {"restricted", POD("\"containers\":[" C("c", ",\"securityContext\":{\"allowPrivilegeEscalation\":false,"
                       "\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"},\"capabilities\":"
                       "{\"drop\":[\"ALL\"],\"add\":[\"NET_BIND_SERVICE\"]}}") "]"),
     NULL},
    /* before 1.22 restricted checked capabilities as baseline does */
    {"restricted:v1.21", POD("\"securityContext\":{\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"RuntimeDefault\"}},"
                             "\"containers\":[" C("c", ",\"securityContext\":{\"allowPrivilegeEscalation\":false,"
                             "\"capabilities\":{\"add\":[\"SYS_TIME\"]}}") "]"),
     "non-default capabilities (container \"c\" must not include \"SYS_TIME\" in securityContext.capabilities.add)"},
    /* seccomp at restricted: the pod's profile covers its containers */
    {"restricted", POD("\"securityContext\":{\"seccompProfile\":{\"type\":\"RuntimeDefault\"},\"runAsNonRoot\":true},"
                       "\"containers\":[" C("c", ",\"securityContext\":{\"allowPrivilegeEscalation\":false,"
                       "\"capabilities\":{\"drop\":[\"ALL\"]}}") "]"),
     NULL},
    {"restricted", POD("\"containers\":[" C("c", ",\"securityContext\":{\"allowPrivilegeEscalation\":false,"
                       "\"runAsNonRoot\":true,\"seccompProfile\":{\"type\":\"Unconfined\"},\"capabilities\":"
                       "{\"drop\":[\"ALL\"]}}") "]"),
     "seccompProfile (container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")"},
    /* several failures: baseline checks first by id, restricted ones after */
    {"baseline", POD("\"hostPID\":true,\"containers\":[" C("c", ",\"securityContext\":{\"privileged\":true}") "],"
                     "\"volumes\":[{\"name\":\"host\",\"hostPath\":{\"path\":\"/\"}}]"),
     "host namespaces (hostPID=true), hostPath volumes (volume \"host\"), privileged (container \"c\" must not set "
     "securityContext.privileged=true)"},
};

Test(podsecurity, checks_pass_and_fail_with_upstream_messages) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        char *got = eval(CASES[i].lv, CASES[i].pod);
        if (!CASES[i].want) cr_expect_null(got, "case %zu (%s): refused: %s", i, CASES[i].lv, got);
        else cr_expect(got && strcmp(got, CASES[i].want) == 0, "case %zu (%s):\n got %s\nwant %s", i, CASES[i].lv,
                       got ? got : "(allowed)", CASES[i].want);
        free(got);
    }
}

Test(podsecurity, reasons_alone) {
    struct kite_psa_lv lv = {.level = KITE_PSA_BASELINE, .latest = true};
    json_object *spec = json_tokener_parse("{\"hostNetwork\":true,\"containers\":[{\"name\":\"c\",\"securityContext\":"
                                           "{\"privileged\":true}}]}");
    char *reasons = NULL, *detail = kite_psa_evaluate(&lv, NULL, spec, &reasons);
    cr_assert_str_eq(reasons, "host namespaces, privileged");
    cr_assert_not_null(detail);
    free(reasons), free(detail);
    json_object_put(spec);
}

Test(podsecurity, levels_and_versions) {
    struct kite_psa_lv lv;
    char s[KITE_PSA_LV_MAX];
    cr_assert_eq(kite_psa_parse_lv("restricted", &lv), 0);
    kite_psa_lv_format(&lv, s);
    cr_assert_str_eq(s, "restricted:latest");
    cr_assert_eq(kite_psa_parse_lv("baseline:v1.30", &lv), 0);
    kite_psa_lv_format(&lv, s);
    cr_assert_str_eq(s, "baseline:v1.30");
    cr_assert_eq(kite_psa_parse_lv("privileged:v1.0", &lv), 0);
    const char *bad[] = {"", "strict", "Baseline", "baseline:", "baseline:1.30", "baseline:v1.030", "baseline:v2.1",
                         "baseline:v1.", "baseline:v1.3x", "baseline:latest:x", "baseline:v1.9999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) cr_expect_eq(kite_psa_parse_lv(bad[i], &lv), -EINVAL, "%s", bad[i]);
    /* a version past the one kite serves runs latest's checks, printed as given */
    free(eval("baseline:v1.99", POD("\"containers\":[" C("c", "") "]")));
    char *r = eval("baseline:v1.99", POD("\"hostPID\":true,\"containers\":[" C("c", "") "]"));
    cr_assert_str_eq(r, "host namespaces (hostPID=true)");
    free(r);
}

static void policy(const char *labels, struct kite_psa_policy *p, struct kite_causes *errs) {
    struct kite_psa_policy def = {{KITE_PSA_BASELINE, true, 0}, {KITE_PSA_PRIVILEGED, true, 0}, {KITE_PSA_PRIVILEGED, true, 0}};
    json_object *l = json_tokener_parse(labels);
    kite_psa_policy_from_labels(l, &def, p, errs);
    json_object_put(l);
}

static const char *fmt(const struct kite_psa_lv *lv) {
    static char s[4][KITE_PSA_LV_MAX];
    static int k;
    k = (k + 1) % 4;
    kite_psa_lv_format(lv, s[k]);
    return s[k];
}

Test(podsecurity, policy_from_labels) {
    struct kite_psa_policy p;
    struct kite_causes errs = {0};
    policy("{}", &p, &errs);
    cr_assert_str_eq(fmt(&p.enforce), "baseline:latest");
    cr_assert_str_eq(fmt(&p.warn), "privileged:latest");
    /* enforce raises warn (and its version) when warn is not labelled */
    policy("{\"pod-security.kubernetes.io/enforce\":\"restricted\","
           "\"pod-security.kubernetes.io/enforce-version\":\"v1.29\"}", &p, &errs);
    cr_assert_str_eq(fmt(&p.enforce), "restricted:v1.29");
    cr_assert_str_eq(fmt(&p.warn), "restricted:v1.29");
    cr_assert_str_eq(fmt(&p.audit), "privileged:latest");
    policy("{\"pod-security.kubernetes.io/enforce\":\"restricted\",\"pod-security.kubernetes.io/warn\":\"baseline\"}",
           &p, &errs);
    cr_assert_str_eq(fmt(&p.warn), "baseline:latest");
    cr_assert_eq(errs.n, 0);
    /* invalid values: enforce fails closed (restricted), audit and warn open (privileged) */
    policy("{\"pod-security.kubernetes.io/enforce\":\"strict\",\"pod-security.kubernetes.io/audit\":\"x\","
           "\"pod-security.kubernetes.io/audit-version\":\"v1\"}", &p, &errs);
    cr_assert_str_eq(fmt(&p.enforce), "restricted:latest");
    cr_assert_str_eq(fmt(&p.audit), "privileged:latest");
    cr_assert_eq(errs.n, 3);
    cr_assert_str_eq(errs.v[0].field, "metadata.labels[pod-security.kubernetes.io/enforce]");
    cr_assert_str_eq(errs.v[0].message, "Invalid value: \"strict\": must be one of privileged, baseline, restricted");
    cr_assert_str_eq(errs.v[2].field, "metadata.labels[pod-security.kubernetes.io/audit-version]");
    cr_assert_str_eq(errs.v[2].message, "Invalid value: \"v1\": must be \"latest\" or \"v1.x\"");
    kite_causes_release(&errs);
}
