/* The VersionInfo, DaemonEndpoints and Images setters. */
#include "agent/nodestatus/internal.h"

#include <stdio.h>

#include "agent/runtime/runtime.h"

const char *kite_ns_goarch(const char *machine) {
    static const struct { const char *uname, *go; } table[] = {
        {"x86_64", "amd64"},   {"amd64", "amd64"},     {"aarch64", "arm64"}, {"arm64", "arm64"},
        {"i386", "386"},       {"i486", "386"},        {"i586", "386"},      {"i686", "386"},
        {"ppc64le", "ppc64le"}, {"ppc64", "ppc64"},    {"s390x", "s390x"},   {"riscv64", "riscv64"},
        {"mips64", "mips64"},  {"loongarch64", "loong64"},
    };
    if (!machine) return "";
    for (size_t i = 0; i < KITE_ARRAY_SIZE(table); i++)
        if (strcmp(machine, table[i].uname) == 0) return table[i].go;
    /* armv6l, armv7l, armv8l (32-bit userland), arm */
    if (kite_startswith(machine, "arm")) return "arm";
    return machine;
}

static void set_info(struct ns_ctx *c, const char *key, const char *value) {
    json_object_object_add(kite_ns_obj(c, "nodeInfo"), key, json_object_new_string(value ? value : ""));
}

int kite_ns_set_version(struct ns_ctx *c) {
    int err = 0;
    const struct ns_facts *f = c->facts;
    if (f->kernel) set_info(c, "kernelVersion", f->kernel);
    if (f->arch) set_info(c, "architecture", f->arch);
    /* cAdvisor reports "Linux" when os-release has no PRETTY_NAME */
    set_info(c, "osImage", f->os_image ? f->os_image : "Linux");
    set_info(c, "operatingSystem", "linux");
    set_info(c, "kubeletVersion", c->cfg->kubelet_version);
    /* Kubernetes 1.32 (DisableNodeKubeProxyVersion on by default) leaves kubeProxyVersion empty. */
    set_info(c, "kubeProxyVersion", "");

    if (c->in->version) set_info(c, "containerRuntimeVersion", c->in->version);
    err = c->in->version_r;
    return err;
}

int kite_ns_set_daemon(struct ns_ctx *c) {
    json_object *ep = json_object_new_object();
    json_object_object_add(ep, "Port", json_object_new_int(c->cfg->daemon_port));
    json_object_object_add(kite_ns_obj(c, "daemonEndpoints"), "kubeletEndpoint", ep);
    return 0;
}

static int cmp_image(const void *a, const void *b) {
    const struct kite_image *x = *(const struct kite_image *const *)a, *y = *(const struct kite_image *const *)b;
    if (x->size_bytes != y->size_bytes) return x->size_bytes < y->size_bytes ? 1 : -1;
    /* ties broken by first name so that equal inputs give byte-equal status */
    const char *nx = x->n_names ? x->names[0] : "", *ny = y->n_names ? y->names[0] : "";
    return strcmp(nx, ny);
}

int kite_ns_set_images(struct ns_ctx *c) {
    struct kite_runtime *rt = c->src->runtime;
    if (!rt || !rt->ops->list_images) return 0;
    struct kite_image *listed = NULL;
    const struct kite_image *v;
    size_t n = 0;
    int r;
    if (c->in->images_listed) { /* by kite_nodestatus_read */
        r = c->in->images_r;
        v = c->in->images;
        n = r == 0 ? c->in->n_images : 0;
    } else {
        r = rt->ops->list_images(rt, &listed, &n);
        v = listed;
    }
    if (r < 0) return r;
    const struct kite_image **sorted = kite_calloc(n ? n : 1, sizeof *sorted);
    for (size_t i = 0; i < n; i++) sorted[i] = &v[i];
    if (n) qsort(sorted, n, sizeof *sorted, cmp_image);
    size_t keep = c->cfg->max_images >= 0 && (size_t)c->cfg->max_images < n
                      ? (size_t)c->cfg->max_images
                      : n;
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < keep; i++) {
        json_object *img = json_object_new_object(), *names = json_object_new_array();
        for (size_t j = 0; j < sorted[i]->n_names && j < NS_MAX_NAMES_PER_IMAGE; j++)
            json_object_array_add(names, json_object_new_string(sorted[i]->names[j]));
        json_object_object_add(img, "names", names);
        json_object_object_add(img, "sizeBytes", json_object_new_int64(sorted[i]->size_bytes));
        json_object_array_add(arr, img);
    }
    free(sorted);
    if (listed) kite_images_free(listed, n);
    if (json_object_array_length(arr))
        json_object_object_add(c->status, "images", arr);
    else
        json_object_put(arr);
    return 0;
}
