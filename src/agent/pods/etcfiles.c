/* /etc/hosts, /etc/hostname and /etc/resolv.conf of a pod, as the kubelet (hosts: its managed
 * hosts file; resolv.conf: its DNS configurer) and the container runtime (hostname) make them:
 * written into the pod's directory and bind-mounted into each container that does not mount
 * the path itself. A hostNetwork pod's hosts file is the node's with the hostAliases added. */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "agent/pods/pods-int.h"
#include "base/buf.h"

#define HOST_RESOLV_CONF "/etc/resolv.conf"
#define HOST_HOSTS "/etc/hosts"

static void aliases(struct kite_buf *b, json_object *ha) {
    size_t n = ha && json_object_is_type(ha, json_type_array) ? json_object_array_length(ha) : 0;
    if (!n) return;
    kite_buf_puts(b, "\n# Entries added by HostAliases.\n");
    for (size_t i = 0; i < n; i++) {
        json_object *a = json_object_array_get_idx(ha, i), *hn = kite_agent_pj(a, "hostnames");
        kite_buf_puts(b, kite_agent_pjs(a, "ip") ? kite_agent_pjs(a, "ip") : "");
        size_t m = hn && json_object_is_type(hn, json_type_array) ? json_object_array_length(hn) : 0;
        for (size_t j = 0; j < m; j++) kite_buf_printf(b, "\t%s", json_object_get_string(json_object_array_get_idx(hn, j)));
        kite_buf_putc(b, '\n');
    }
}

char *kite_pods_hosts_content(const char *ip, const char *hostname, const char *domain, json_object *host_aliases,
                         const char *node_hosts) {
    struct kite_buf b = {0};
    if (node_hosts) {
        kite_buf_puts(&b, "# Kubernetes-managed hosts file (host network).\n");
        kite_buf_puts(&b, node_hosts);
    } else {
        kite_buf_puts(&b, "# Kubernetes-managed hosts file.\n"
                          "127.0.0.1\tlocalhost\n"
                          "::1\tlocalhost ip6-localhost ip6-loopback\n"
                          "fe00::0\tip6-localnet\n"
                          "fe00::0\tip6-mcastprefix\n"
                          "fe00::1\tip6-allnodes\n"
                          "fe00::2\tip6-allrouters\n");
        if (ip && *ip) {
            if (domain && *domain) kite_buf_printf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname);
            else kite_buf_printf(&b, "%s\t%s\n", ip, hostname);
        }
    }
    aliases(&b, host_aliases);
    return b.p;
}

static void add_unique(char ***v, size_t *n, const char *s, size_t len) {
    for (size_t i = 0; i < *n; i++)
        if (strlen((*v)[i]) == len && strncmp((*v)[i], s, len) == 0) return;
    *v = kite_realloc(*v, (*n + 1) * sizeof(char *));
    (*v)[(*n)++] = kite_strndup(s, len);
}

/* option "name[:value]": a later one of the same name replaces */
static void add_option(char ***v, size_t *n, const char *s) {
    size_t nl = strcspn(s, ":");
    for (size_t i = 0; i < *n; i++)
        if (strncmp((*v)[i], s, nl) == 0 && ((*v)[i][nl] == 0 || (*v)[i][nl] == ':')) {
            free((*v)[i]);
            (*v)[i] = kite_strdup(s);
            return;
        }
    *v = kite_realloc(*v, (*n + 1) * sizeof(char *));
    (*v)[(*n)++] = kite_strdup(s);
}

/* The words of the host's resolv.conf lines starting with `key`. */
static void host_words(const char *text, const char *key, char ***v, size_t *n, bool options) {
    size_t kl = strlen(key);
    for (const char *l = text; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        if (len > kl && strncmp(l, key, kl) == 0 && (l[kl] == ' ' || l[kl] == '\t')) {
            if (!options && strcmp(key, "search") == 0) { /* the last search line wins, as the resolver */
                kite_strv_free(*v, *n);
                *v = NULL;
                *n = 0;
            }
            for (size_t i = kl; i < len;) {
                while (i < len && (l[i] == ' ' || l[i] == '\t' || l[i] == '\r')) i++;
                size_t s = i;
                while (i < len && l[i] != ' ' && l[i] != '\t' && l[i] != '\r') i++;
                if (i == s) break;
                if (options) {
                    _cleanup_free_ char *o = kite_strndup(l + s, i - s);
                    add_option(v, n, o);
                } else {
                    add_unique(v, n, l + s, i - s);
                }
            }
        }
        l = end ? end + 1 : NULL;
    }
}

static void str_list(json_object *arr, char ***v, size_t *n, bool options) {
    size_t m = arr && json_object_is_type(arr, json_type_array) ? json_object_array_length(arr) : 0;
    for (size_t i = 0; i < m; i++) {
        json_object *e = json_object_array_get_idx(arr, i);
        if (options) {
            const char *name = kite_agent_pjs(e, "name"), *val = kite_agent_pjs(e, "value");
            if (!name) continue;
            _cleanup_free_ char *o = val ? kite_asprintf("%s:%s", name, val) : kite_strdup(name);
            add_option(v, n, o);
        } else {
            const char *s = json_object_get_string(e);
            if (s) add_unique(v, n, s, strlen(s));
        }
    }
}

char *kite_pods_resolv_content(json_object *spec, const char *ns, const char *cluster_dns, const char *cluster_domain,
                          const char *host_resolv) {
    const char *policy = kite_agent_pjs(spec, "dnsPolicy") ? kite_agent_pjs(spec, "dnsPolicy") : "ClusterFirst";
    json_object *hn = kite_agent_pj(spec, "hostNetwork");
    bool host_net = hn && json_object_get_boolean(hn);
    bool cluster = (strcmp(policy, "ClusterFirst") == 0 && !host_net) || strcmp(policy, "ClusterFirstWithHostNet") == 0;
    if (cluster && (!cluster_dns || !*cluster_dns)) cluster = false; /* no cluster DNS: the host's, as the kubelet */
    bool none = strcmp(policy, "None") == 0;
    char **srv = NULL, **search = NULL, **opts = NULL;
    size_t nsrv = 0, nsearch = 0, nopts = 0;
    if (cluster) {
        for (const char *s = cluster_dns; *s;) {
            size_t len = strcspn(s, ",");
            if (len) add_unique(&srv, &nsrv, s, len);
            s += len + (s[len] == ',');
        }
        const char *d = cluster_domain && *cluster_domain ? cluster_domain : "cluster.local";
        _cleanup_free_ char *a = kite_asprintf("%s.svc.%s", ns, d), *b = kite_asprintf("svc.%s", d);
        add_unique(&search, &nsearch, a, strlen(a));
        add_unique(&search, &nsearch, b, strlen(b));
        add_unique(&search, &nsearch, d, strlen(d));
        char **hs = NULL;
        size_t nhs = 0;
        host_words(host_resolv, "search", &hs, &nhs, false);
        for (size_t i = 0; i < nhs; i++) add_unique(&search, &nsearch, hs[i], strlen(hs[i]));
        kite_strv_free(hs, nhs);
        add_option(&opts, &nopts, "ndots:5");
    } else if (!none) {
        host_words(host_resolv, "nameserver", &srv, &nsrv, false);
        host_words(host_resolv, "search", &search, &nsearch, false);
        host_words(host_resolv, "options", &opts, &nopts, true);
    }
    json_object *dc = kite_agent_pj(spec, "dnsConfig");
    str_list(kite_agent_pj(dc, "nameservers"), &srv, &nsrv, false);
    str_list(kite_agent_pj(dc, "searches"), &search, &nsearch, false);
    str_list(kite_agent_pj(dc, "options"), &opts, &nopts, true);
    struct kite_buf b = {0};
    if (nsearch) {
        kite_buf_puts(&b, "search");
        for (size_t i = 0; i < nsearch && i < KITE_PODS_DNS_MAX_SEARCHES; i++) kite_buf_printf(&b, " %s", search[i]);
        kite_buf_putc(&b, '\n');
    }
    for (size_t i = 0; i < nsrv && i < KITE_PODS_DNS_MAX_NAMESERVERS; i++) kite_buf_printf(&b, "nameserver %s\n", srv[i]);
    if (nopts) {
        kite_buf_puts(&b, "options");
        for (size_t i = 0; i < nopts; i++) kite_buf_printf(&b, " %s", opts[i]);
        kite_buf_putc(&b, '\n');
    }
    if (!b.p) kite_buf_puts(&b, "");
    kite_strv_free(srv, nsrv);
    kite_strv_free(search, nsearch);
    kite_strv_free(opts, nopts);
    return b.p;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "re");
    if (!f) return kite_strdup("");
    struct kite_buf b = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0 && b.len < KITE_PODS_HOST_FILE_MAX) kite_buf_append(&b, buf, n);
    fclose(f);
    if (!b.p) kite_buf_puts(&b, "");
    return b.p;
}

static int write_file(const char *path, const char *text, char **ret_err) {
    _cleanup_free_ char *tmp = kite_asprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) < 0) {
        int e = errno;
        *ret_err = kite_asprintf("writing %s: %s", path, strerror(e));
        return -e;
    }
    chmod(path, 0644);
    return 0;
}

static bool mounts_path(json_object *ctr, const char *path) {
    json_object *vm = kite_agent_pj(ctr, "volumeMounts");
    size_t n = vm && json_object_is_type(vm, json_type_array) ? json_object_array_length(vm) : 0;
    for (size_t i = 0; i < n; i++)
        if (kite_streq(kite_agent_pjs(json_object_array_get_idx(vm, i), "mountPath"), path)) return true;
    return false;
}

int kite_pods_etc_mounts(struct kite_pods *p, struct pod *pod, json_object *ctr, const char *hostname,
                    struct kite_mount **mounts, size_t *n, char ***paths, char **ret_err) {
    _cleanup_free_ char *dir = kite_pods_pod_dir(p, pod->uid);
    if (!dir) return 0;
    _cleanup_free_ char *pods = kite_asprintf("%s/pods", p->root_dir);
    if ((mkdir(pods, 0750) < 0 && errno != EEXIST) || (mkdir(dir, 0750) < 0 && errno != EEXIST)) {
        int e = errno;
        *ret_err = kite_asprintf("creating %s: %s", dir, strerror(e));
        return -e;
    }
    json_object *spec = kite_agent_pj(pod->obj, "spec"), *hn = kite_agent_pj(spec, "hostNetwork");
    bool host_net = hn && json_object_get_boolean(hn);
    const char *sub = kite_agent_pjs(spec, "subdomain");
    _cleanup_free_ char *domain = sub && *sub ? kite_asprintf("%s.%s.svc.%s", sub, pod->ns,
                                                                 p->cluster_domain ? p->cluster_domain : "cluster.local")
                                              : NULL;
    _cleanup_free_ char *node_hosts = host_net ? read_text(HOST_HOSTS) : NULL;
    _cleanup_free_ char *host_resolv = read_text(HOST_RESOLV_CONF);
    _cleanup_free_ char *hosts = kite_pods_hosts_content(pod->sandbox_ip, hostname, domain, kite_agent_pj(spec, "hostAliases"), node_hosts);
    _cleanup_free_ char *resolv = kite_pods_resolv_content(spec, pod->ns, p->cluster_dns, p->cluster_domain, host_resolv);
    _cleanup_free_ char *hname = kite_asprintf("%s\n", hostname);
    static const char *const names[] = {"etc-hosts", "hostname", "resolv.conf"};
    static const char *const targets[] = {"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"};
    const char *texts[] = {hosts, hname, resolv};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(names); i++) {
        _cleanup_free_ char *path = kite_asprintf("%s/%s", dir, names[i]);
        int r = write_file(path, texts[i], ret_err);
        if (r < 0) return r;
        if (mounts_path(ctr, targets[i])) continue;
        *mounts = kite_realloc(*mounts, (*n + 1) * sizeof(**mounts));
        *paths = kite_realloc(*paths, (*n + 1) * sizeof(char *));
        (*paths)[*n] = kite_strdup(path);
        (*mounts)[*n] = (struct kite_mount){.host_path = (*paths)[*n], .container_path = targets[i]};
        (*n)++;
    }
    return 0;
}
