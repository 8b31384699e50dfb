/* Agent configuration: KubeletConfiguration field names in a YAML file, then kubelet-style
 * flags over it. Every error names the field or flag and quotes the bad value. */
#include <stdarg.h>
#include <stdio.h>

#include "agent/agent.h"
#include "base/buf.h"
#include "agent/logs/logs.h"
#include "agent/pods/pods.h"
#include "agent/runtime/ipam.h"
#include "agent/runtime/net.h"
#include "api/quantity.h"
#include "api/yaml.h"

#define KITE_AGENT_DEFAULT_ROOT "/var/lib/kite-agent"

void kite_agent_config_init(struct kite_agent_config *c) {
    *c = (struct kite_agent_config){0};
    c->status_update_freq_ns = 10 * KITE_NS_PER_SEC;
    c->status_report_freq_ns = 300 * KITE_NS_PER_SEC;
    c->lease_duration_s = 40;
    c->backoff_base_ns = KITE_PODS_BACKOFF_MIN_NS;
    c->stream_buffer = KITE_STREAM_BUFFER;
    c->register_node = true;
    c->register_schedulable = true;
    c->taints = json_object_new_array();
    c->labels = json_object_new_object();
    c->root_dir = kite_strdup(KITE_AGENT_DEFAULT_ROOT);
    kite_ns_config_defaults(&c->ns);
}

void kite_agent_config_release(struct kite_agent_config *c) {
    free(c->node_name);
    free(c->node_ip);
    free(c->address);
    free(c->tls_cert_file);
    free(c->tls_key_file);
    free(c->client_ca_file);
    free(c->root_dir);
    free(c->pod_cidr);
    free(c->cluster_dns);
    free(c->cluster_domain);
    free(c->pod_bridge);
    free(c->proxy_table);
    free(c->dns_upstream_conf);
    free(c->allowed_unsafe_sysctls);
    json_object_put(c->taints);
    json_object_put(c->labels);
    *c = (struct kite_agent_config){0};
}

static int set_unsafe_sysctls(struct kite_agent_config *c, const char *where, const char *v, char **err);
static int fail(char **ret_err, const char *fmt, ...) KITE_PRINTF(2, 3);
static int fail(char **ret_err, const char *fmt, ...) {
    if (ret_err) {
        va_list ap;
        va_start(ap, fmt);
        if (vasprintf(ret_err, fmt, ap) < 0) abort();
        va_end(ap);
    }
    return -EINVAL;
}

/* "where" is "config: field" or "flag --name"; every parser reports through it. */
static int parse_duration(const char *where, const char *v, int64_t *ret, char **err) {
    int64_t ns;
    if (kite_duration_parse(v, &ns) < 0) return fail(err, "%s: invalid duration \"%s\"", where, v);
    if (ns <= 0) return fail(err, "%s: duration must be positive, got \"%s\"", where, v);
    *ret = ns;
    return 0;
}

static int parse_int(const char *where, const char *v, int64_t min, int64_t max, int64_t *ret, char **err) {
    int64_t i;
    if (kite_parse_int64(v, &i) < 0) return fail(err, "%s: invalid integer \"%s\"", where, v);
    if (i < min || i > max)
        return fail(err, "%s: %s out of range [%lld, %lld]", where, v, (long long)min, (long long)max);
    *ret = i;
    return 0;
}

/* An IPv4 CIDR the pod network can hand addresses out of (ipam.h). */
static int parse_cidr(const char *where, const char *v, char **ret, char **err) {
    struct kite_cidr c;
    _cleanup_free_ char *why = NULL;
    if (kite_cidr_parse(v, &c, &why) < 0) return fail(err, "%s: %s", where, why);
    free(*ret);
    *ret = kite_strdup(v);
    return 0;
}

static int parse_bool(const char *where, const char *v, bool *ret, char **err) {
    if (kite_streq(v, "true") || kite_streq(v, "1")) *ret = true;
    else if (kite_streq(v, "false") || kite_streq(v, "0")) *ret = false;
    else return fail(err, "%s: invalid boolean \"%s\"", where, v);
    return 0;
}

static bool valid_effect(const char *e) {
    return kite_streq(e, "NoSchedule") || kite_streq(e, "PreferNoSchedule") || kite_streq(e, "NoExecute");
}

static int add_taint(json_object *arr, const char *where, const char *key, const char *value, const char *effect,
                     char **err) {
    if (!key || !*key) return fail(err, "%s: taint without a key", where);
    if (!effect || !valid_effect(effect))
        return fail(err, "%s: taint %s: invalid effect \"%s\" (NoSchedule, PreferNoSchedule or NoExecute)", where,
                    key, effect ? effect : "");
    json_object *t = json_object_new_object();
    json_object_object_add(t, "key", json_object_new_string(key));
    if (value && *value) json_object_object_add(t, "value", json_object_new_string(value));
    json_object_object_add(t, "effect", json_object_new_string(effect));
    json_object_array_add(arr, t);
    return 0;
}

/* evictionHard: signal -> "100Mi" (absolute) or "10%". */
static int eviction(struct kite_ns_config *ns, const char *where, const char *signal, const char *v, char **err) {
    int64_t *abs = NULL;
    double *pct = NULL;
    if (kite_streq(signal, "memory.available")) abs = &ns->evict_mem_bytes, pct = &ns->evict_mem_pct;
    else if (kite_streq(signal, "nodefs.available")) abs = &ns->evict_nodefs_bytes, pct = &ns->evict_nodefs_pct;
    else if (kite_streq(signal, "nodefs.inodesFree"))
        abs = &ns->evict_inodes_count, pct = &ns->evict_inodes_pct;
    else if (kite_streq(signal, "pid.available")) abs = &ns->evict_pid_count, pct = &ns->evict_pid_pct;
    else if (kite_startswith(signal, "imagefs.") || kite_startswith(signal, "containerfs."))
        return 0; /* kite has no separate image filesystem: accepted, nothing to do */
    else return fail(err, "%s: unknown eviction signal \"%s\"", where, signal);
    size_t n = strlen(v);
    if (n > 1 && v[n - 1] == '%') {
        char *end;
        double p = strtod(v, &end);
        if (end != v + n - 1 || p < 0 || p > 100) return fail(err, "%s: %s: invalid percentage \"%s\"", where, signal, v);
        *pct = p;
        *abs = -1; /* the absolute value would win over the percentage */
        return 0;
    }
    int64_t m;
    if (kite_quantity_parse_milli(v, &m) < 0 || m < 0)
        return fail(err, "%s: %s: invalid quantity \"%s\"", where, signal, v);
    *abs = m / 1000; /* bytes or counts */
    *pct = -1;
    return 0;
}

static int reserved(struct kite_ns_config *ns, bool kube, const char *where, const char *res, const char *v,
                    char **err) {
    int64_t m;
    if (kite_quantity_parse_milli(v, &m) < 0 || m < 0) return fail(err, "%s: %s: invalid quantity \"%s\"", where, res, v);
    if (kite_streq(res, "cpu")) *(kube ? &ns->kube_reserved_cpu_m : &ns->system_reserved_cpu_m) = m;
    else if (kite_streq(res, "memory")) *(kube ? &ns->kube_reserved_mem_m : &ns->system_reserved_mem_m) = m;
    else if (kite_streq(res, "ephemeral-storage")) *(kube ? &ns->kube_reserved_eph_m : &ns->system_reserved_eph_m) = m;
    else if (kite_streq(res, "pid")) return 0; /* pid reservations are not modelled */
    else return fail(err, "%s: unknown resource \"%s\"", where, res);
    return 0;
}

static const char *scalar(json_object *v) {
    if (!v) return "";
    if (json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array)) return NULL;
    return json_object_get_string(v);
}

/* Map-valued fields: evictionHard, kubeReserved, systemReserved. */
static int apply_map(struct kite_agent_config *c, const char *field, json_object *v, char **err) {
    if (!json_object_is_type(v, json_type_object)) return fail(err, "config: %s: expected a mapping", field);
    _cleanup_free_ char *where = kite_asprintf("config: %s", field);
    json_object_object_foreach(v, key, val) {
        const char *s = scalar(val);
        if (!s) return fail(err, "%s: %s: expected a string", where, key);
        int r = kite_streq(field, "evictionHard") ? eviction(&c->ns, where, key, s, err)
                                                  : reserved(&c->ns, kite_streq(field, "kubeReserved"), where, key, s, err);
        if (r < 0) return r;
    }
    return 0;
}

int kite_agent_config_apply(struct kite_agent_config *c, json_object *root, char **err) {
    if (!json_object_is_type(root, json_type_object)) return fail(err, "config: expected a mapping at the top");
    json_object_object_foreach(root, key, v) {
        _cleanup_free_ char *where = kite_asprintf("config: %s", key);
        const char *s = scalar(v);
        int64_t i;
        int r = 0;
        if (kite_streq(key, "evictionHard") || kite_streq(key, "kubeReserved") || kite_streq(key, "systemReserved")) {
            r = apply_map(c, key, v, err);
        } else if (kite_streq(key, "registerWithTaints")) {
            if (!json_object_is_type(v, json_type_array)) return fail(err, "%s: expected a list", where);
            json_object *arr = json_object_new_array();
            for (size_t k = 0; k < json_object_array_length(v) && r == 0; k++) {
                json_object *t = json_object_array_get_idx(v, k), *f;
                const char *tk = json_object_object_get_ex(t, "key", &f) ? json_object_get_string(f) : NULL;
                const char *tv = json_object_object_get_ex(t, "value", &f) ? json_object_get_string(f) : NULL;
                const char *te = json_object_object_get_ex(t, "effect", &f) ? json_object_get_string(f) : NULL;
                r = add_taint(arr, where, tk, tv, te, err);
            }
            if (r < 0) {
                json_object_put(arr);
                return r;
            }
            json_object_put(c->taints);
            c->taints = arr;
        } else if (kite_streq(key, "allowedUnsafeSysctls")) {
            if (!json_object_is_type(v, json_type_array)) return fail(err, "%s: expected a list", where);
            struct kite_buf b = {0};
            for (size_t k = 0; k < json_object_array_length(v); k++) {
                json_object *e = json_object_array_get_idx(v, k);
                if (!json_object_is_type(e, json_type_string) || strchr(json_object_get_string(e), ',')) {
                    kite_buf_release(&b);
                    return fail(err, "%s: item %zu: expected a sysctl name", where, k);
                }
                kite_buf_printf(&b, "%s%s", k ? "," : "", json_object_get_string(e));
            }
            r = set_unsafe_sysctls(c, where, b.p ? b.p : "", err);
            kite_buf_release(&b);
        } else if (kite_streq(key, "clusterDNS")) {
            if (!json_object_is_type(v, json_type_array)) return fail(err, "%s: expected a list", where);
            struct kite_buf b = {0};
            for (size_t k = 0; k < json_object_array_length(v); k++)
                kite_buf_printf(&b, "%s%s", k ? "," : "", json_object_get_string(json_object_array_get_idx(v, k)));
            free(c->cluster_dns);
            c->cluster_dns = b.p;
        } else if (kite_streq(key, "authentication") && json_object_is_type(v, json_type_object)) {
            json_object *x509 = NULL, *ca = NULL;
            if (json_object_object_get_ex(v, "x509", &x509) && json_object_object_get_ex(x509, "clientCAFile", &ca) &&
                json_object_is_type(ca, json_type_string)) {
                free(c->client_ca_file);
                c->client_ca_file = kite_strdup(json_object_get_string(ca));
            }
        } else if (!s) {
            if (kite_streq(key, "apiVersion") || kite_streq(key, "kind")) continue;
            continue; /* other structured KubeletConfiguration fields kite does not read */
        } else if (kite_streq(key, "nodeStatusUpdateFrequency")) {
            r = parse_duration(where, s, &c->status_update_freq_ns, err);
            c->update_freq_set = true;
        } else if (kite_streq(key, "nodeStatusReportFrequency")) {
            r = parse_duration(where, s, &c->status_report_freq_ns, err);
            c->report_freq_set = true;
        } else if (kite_streq(key, "nodeLeaseDurationSeconds")) {
            if ((r = parse_int(where, s, 1, 3600, &i, err)) == 0) c->lease_duration_s = (int32_t)i;
        } else if (kite_streq(key, "maxPods")) {
            if ((r = parse_int(where, s, 1, 1000000, &i, err)) == 0) c->ns.max_pods = (int)i;
        } else if (kite_streq(key, "nodeStatusMaxImages")) {
            if ((r = parse_int(where, s, -1, 1000000, &i, err)) == 0) c->ns.max_images = (int)i;
        } else if (kite_streq(key, "port")) {
            if ((r = parse_int(where, s, 0, 65535, &i, err)) == 0) c->ns.daemon_port = (int)i;
        } else if (kite_streq(key, "registerNode")) {
            r = parse_bool(where, s, &c->register_node, err);
        } else if (kite_streq(key, "seccompDefault")) {
            r = parse_bool(where, s, &c->seccomp_default, err);
        } else if (kite_streq(key, "podCIDR")) {
            r = parse_cidr(where, s, &c->pod_cidr, err);
        } else if (kite_streq(key, "clusterDomain")) {
            free(c->cluster_domain);
            c->cluster_domain = *s ? kite_strdup(s) : NULL;
        } else if (kite_streq(key, "address")) {
            free(c->address);
            c->address = kite_strdup(s);
        } else if (kite_streq(key, "tlsCertFile")) {
            free(c->tls_cert_file);
            c->tls_cert_file = kite_strdup(s);
        } else if (kite_streq(key, "tlsPrivateKeyFile")) {
            free(c->tls_key_file);
            c->tls_key_file = kite_strdup(s);
        }
        if (r < 0) return r;
    }
    return 0;
}

int kite_agent_config_load_file(struct kite_agent_config *c, const char *path, char **err) {
    json_object *root = NULL;
    _cleanup_free_ char *yerr = NULL;
    int r = kite_yaml_load_file(path, &root, &yerr);
    if (r < 0) {
        if (err) *err = kite_asprintf("config %s: %s", path, yerr ? yerr : strerror(-r));
        return r;
    }
    r = kite_agent_config_apply(c, root, err);
    json_object_put(root);
    return r;
}

/* "k=v,k2=v2" */
static int parse_labels(struct kite_agent_config *c, const char *where, const char *v, char **err) {
    _cleanup_free_ char *copy = kite_strdup(v);
    json_object *labels = json_object_new_object();
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok) {
            json_object_put(labels);
            return fail(err, "%s: invalid label \"%s\" (want key=value)", where, tok);
        }
        *eq = 0;
        json_object_object_add(labels, tok, json_object_new_string(eq + 1));
    }
    json_object_put(c->labels);
    c->labels = labels;
    return 0;
}

/* "k=v:Effect,k2:Effect" */
static int parse_taints(struct kite_agent_config *c, const char *where, const char *v, char **err) {
    _cleanup_free_ char *copy = kite_strdup(v);
    json_object *arr = json_object_new_array();
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(tok, ':');
        if (!colon) {
            json_object_put(arr);
            return fail(err, "%s: invalid taint \"%s\" (want key[=value]:Effect)", where, tok);
        }
        *colon = 0;
        char *eq = strchr(tok, '=');
        if (eq) *eq = 0;
        int r = add_taint(arr, where, tok, eq ? eq + 1 : NULL, colon + 1, err);
        if (r < 0) {
            json_object_put(arr);
            return r;
        }
    }
    json_object_put(c->taints);
    c->taints = arr;
    return 0;
}

/* --allowed-unsafe-sysctls: every name or NAME* pattern must be one the kubelet knows to be
 * namespaced (its NewAllowlist), with the kubelet's messages. */
static int set_unsafe_sysctls(struct kite_agent_config *c, const char *where, const char *v, char **err) {
    _cleanup_free_ char *list = kite_strdup(v);
    struct kite_buf norm = {0};
    char *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        size_t n = strlen(t);
        while (n && t[n - 1] == ' ') t[--n] = 0;
        if (!n) continue;
        _cleanup_free_ char *name = kite_pods_sysctl_normalize(t);
        if (!kite_pods_sysctl_pattern_valid(name)) {
            kite_buf_release(&norm);
            return fail(err, "%s: sysctl \"%s\" must have at most 253 characters and match regex %s", where, t,
                        KITE_SYSCTL_PATTERN_RE);
        }
        size_t star = strcspn(name, "*");
        _cleanup_free_ char *prefix = kite_strndup(name, star);
        if (!kite_pods_sysctl_namespace(prefix)) {
            kite_buf_release(&norm);
            return fail(err, "%s: the sysctls \"%s\" are not known to be namespaced", where, prefix);
        }
        if (norm.len) kite_buf_putc(&norm, ',');
        kite_buf_puts(&norm, name);
    }
    free(c->allowed_unsafe_sysctls);
    c->allowed_unsafe_sysctls = norm.len ? kite_buf_detach(&norm, NULL) : NULL;
    kite_buf_release(&norm);
    return 0;
}

/* an nftables identifier kite writes unquoted */
static bool valid_table(const char *v) {
    size_t n = strlen(v);
    if (n < 1 || n > KITE_AGENT_PROXY_TABLE_MAX || !((*v >= 'a' && *v <= 'z') || (*v >= 'A' && *v <= 'Z'))) return false;
    for (const char *c = v; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_'))
            return false;
    return true;
}

int kite_agent_config_set_flag(struct kite_agent_config *c, const char *name, const char *v, char **err) {
    _cleanup_free_ char *where = kite_asprintf("flag --%s", name);
    int64_t i;
    int r = 0;
    if (kite_streq(name, "node-status-update-frequency")) {
        r = parse_duration(where, v, &c->status_update_freq_ns, err);
        c->update_freq_set = true;
    } else if (kite_streq(name, "node-status-report-frequency")) {
        r = parse_duration(where, v, &c->status_report_freq_ns, err);
        c->report_freq_set = true;
    } else if (kite_streq(name, "node-lease-duration-seconds")) {
        if ((r = parse_int(where, v, 1, 3600, &i, err)) == 0) c->lease_duration_s = (int32_t)i;
    } else if (kite_streq(name, "max-pods")) {
        if ((r = parse_int(where, v, 1, 1000000, &i, err)) == 0) c->ns.max_pods = (int)i;
    } else if (kite_streq(name, "register-node")) {
        r = parse_bool(where, v, &c->register_node, err);
    } else if (kite_streq(name, "register-schedulable")) {
        r = parse_bool(where, v, &c->register_schedulable, err);
    } else if (kite_streq(name, "node-labels")) {
        r = parse_labels(c, where, v, err);
    } else if (kite_streq(name, "register-with-taints")) {
        r = parse_taints(c, where, v, err);
    } else if (kite_streq(name, "port")) {
        if ((r = parse_int(where, v, 0, 65535, &i, err)) == 0) c->ns.daemon_port = (int)i;
    } else if (kite_streq(name, "address") || kite_streq(name, "tls-cert-file") ||
               kite_streq(name, "tls-private-key-file") || kite_streq(name, "client-ca-file")) {
        char **dst = kite_streq(name, "address")       ? &c->address
                     : kite_streq(name, "tls-cert-file") ? &c->tls_cert_file
                     : kite_streq(name, "client-ca-file") ? &c->client_ca_file
                                                          : &c->tls_key_file;
        free(*dst);
        *dst = *v ? kite_strdup(v) : NULL;
    } else if (kite_streq(name, "node-ip")) {
        free(c->node_ip);
        c->node_ip = *v ? kite_strdup(v) : NULL;
    } else if (kite_streq(name, "pod-cidr")) {
        r = parse_cidr(where, v, &c->pod_cidr, err);
    } else if (kite_streq(name, "cluster-dns") || kite_streq(name, "cluster-domain")) {
        char **dst = kite_streq(name, "cluster-dns") ? &c->cluster_dns : &c->cluster_domain;
        free(*dst);
        *dst = *v ? kite_strdup(v) : NULL;
    } else if (kite_streq(name, "pod-bridge")) {
        if (!kite_net_valid_ifname(v))
            return fail(err, "%s: invalid interface name \"%s\" (1 to 15 characters, no '/', ':' or spaces)", where, v);
        free(c->pod_bridge);
        c->pod_bridge = kite_strdup(v);
    } else if (kite_streq(name, "proxy-mode")) {
        if (!kite_streq(v, "nftables") && !kite_streq(v, "none"))
            return fail(err, "%s: unknown mode \"%s\" (nftables or none)", where, v);
        c->proxy = kite_streq(v, "nftables");
    } else if (kite_streq(name, "proxy-table")) {
        if (!valid_table(v))
            return fail(err, "%s: invalid table name \"%s\" (1 to %d letters, digits, '-' or '_', starting with a letter)",
                        where, v, KITE_AGENT_PROXY_TABLE_MAX);
        free(c->proxy_table);
        c->proxy_table = kite_strdup(v);
    } else if (kite_streq(name, "masquerade-pod-traffic")) {
        r = parse_bool(where, v, &c->masquerade_pod_traffic, err);
    } else if (kite_streq(name, "serve-dns")) {
        r = parse_bool(where, v, &c->serve_dns, err);
    } else if (kite_streq(name, "dns-upstream-conf")) {
        free(c->dns_upstream_conf);
        c->dns_upstream_conf = *v ? kite_strdup(v) : NULL;
    } else if (kite_streq(name, "allowed-unsafe-sysctls")) {
        return set_unsafe_sysctls(c, where, v, err);
    } else if (kite_streq(name, "seccomp-default")) {
        r = parse_bool(where, v, &c->seccomp_default, err);
    } else if (kite_streq(name, "stream-buffer")) {
        if ((r = parse_int(where, v, 4096, 64 << 20, &i, err)) == 0) c->stream_buffer = (size_t)i;
    } else if (kite_streq(name, "restart-backoff-base")) {
        if ((r = parse_duration(where, v, &c->backoff_base_ns, err)) == 0 && c->backoff_base_ns < KITE_NS_PER_SEC)
            return fail(err, "%s: must be at least 1s", where);
    } else if (kite_streq(name, "root-dir")) {
        if (!*v) return fail(err, "%s: must not be empty", where);
        free(c->root_dir);
        c->root_dir = kite_strdup(v);
    } else if (kite_streq(name, "node-name") || kite_streq(name, "hostname-override")) {
        if (!*v) return fail(err, "%s: must not be empty", where);
        free(c->node_name);
        c->node_name = kite_strdup(v);
    } else {
        if (err) *err = kite_asprintf("unknown flag --%s", name);
        return -ENOENT;
    }
    return r;
}
