/* The ServiceAccount admission plugin (mutating), as kube-apiserver's
 * plugin/pkg/admission/serviceaccount, on the kind whose object is a pod (its row's
 * pod_template ""), at create:
 * - a pod without spec.serviceAccountName runs as `default`;
 * - a mirror pod (annotation kubernetes.io/config.mirror) may name no ServiceAccount and mount
 *   no token (it is left as it is otherwise);
 * - the ServiceAccount must exist: a missing one is refused 403 with upstream's message. The
 *   `default` one is the exception while it does not exist yet (a namespace made a moment ago,
 *   or a server without the controller-manager): upstream looks it up again for ~1-2 s and
 *   then refuses; kite admits the pod without a token rather than hold an HTTP thread;
 * - the ServiceAccount's imagePullSecrets are the pod's when it names none;
 * - when the token is to be mounted (the pod's automountServiceAccountToken, else the
 *   ServiceAccount's, else true), the projected volume kube-api-access-<5 chars> (a bound
 *   token of 3607 s, kube-root-ca.crt's ca.crt, the namespace) is added and mounted read-only
 *   at /var/run/secrets/kubernetes.io/serviceaccount in every container and init container
 *   that mounts nothing there. */
#include "apiserver/internal.h"

#include <stdio.h>

#define DEFAULT_SA "default"
#define MIRROR_ANNOTATION "kubernetes.io/config.mirror"
#define TOKEN_MOUNT_PATH "/var/run/secrets/kubernetes.io/serviceaccount"
#define TOKEN_VOLUME_PREFIX "kube-api-access-"
#define TOKEN_EXPIRATION_S 3607 /* WarnOnlyBoundTokenExpirationSeconds */
#define ROOT_CA_CONFIGMAP "kube-root-ca.crt"


static bool is_pod(const struct kite_admission_attrs *a) {
    return a->op == KITE_ADMIT_CREATE && !a->sub && a->obj && a->res->pod_template && !*a->res->pod_template;
}

/* utilrand.String(5): the alphabet without vowels and look-alikes */
static void random_suffix(char out[6]) {
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    unsigned char r[5];
    kite_random_bytes(r, sizeof r);
    for (size_t i = 0; i < 5; i++) out[i] = alphabet[r[i] % (sizeof alphabet - 1)];
    out[5] = 0;
}

static json_object *jstr(const char *s) { return json_object_new_string(s); }

/* TokenVolumeSource() */
static json_object *token_volume(const char *name) {
    json_object *tok = json_object_new_object(), *cm = json_object_new_object(), *dapi = json_object_new_object();
    kite_obj_set(tok, "expirationSeconds", json_object_new_int64(TOKEN_EXPIRATION_S));
    kite_obj_set(tok, "path", jstr("token"));
    json_object *item = json_object_new_object(), *items = json_object_new_array();
    kite_obj_set(item, "key", jstr("ca.crt"));
    kite_obj_set(item, "path", jstr("ca.crt"));
    json_object_array_add(items, item);
    kite_obj_set(cm, "name", jstr(ROOT_CA_CONFIGMAP));
    kite_obj_set(cm, "items", items);
    json_object *fref = json_object_new_object(), *ditem = json_object_new_object(), *ditems = json_object_new_array();
    kite_obj_set(fref, "apiVersion", jstr("v1"));
    kite_obj_set(fref, "fieldPath", jstr("metadata.namespace"));
    kite_obj_set(ditem, "fieldRef", fref);
    kite_obj_set(ditem, "path", jstr("namespace"));
    json_object_array_add(ditems, ditem);
    kite_obj_set(dapi, "items", ditems);
    json_object *sources = json_object_new_array();
    json_object *s1 = json_object_new_object(), *s2 = json_object_new_object(), *s3 = json_object_new_object();
    kite_obj_set(s1, "serviceAccountToken", tok);
    kite_obj_set(s2, "configMap", cm);
    kite_obj_set(s3, "downwardAPI", dapi);
    json_object_array_add(sources, s1);
    json_object_array_add(sources, s2);
    json_object_array_add(sources, s3);
    json_object *proj = json_object_new_object(), *vol = json_object_new_object();
    kite_obj_set(proj, "sources", sources);
    kite_obj_set(proj, "defaultMode", json_object_new_int(0644));
    kite_obj_set(vol, "name", jstr(name));
    kite_obj_set(vol, "projected", proj);
    return vol;
}

static void mount_into(json_object *ctrs, const char *vol) {
    for (size_t i = 0; i < kite_array_len(ctrs); i++) {
        json_object *c = json_object_array_get_idx(ctrs, i), *mounts = kite_obj_get(c, "volumeMounts");
        bool has = false;
        for (size_t j = 0; j < kite_array_len(mounts) && !has; j++)
            has = kite_streq(kite_obj_str(json_object_array_get_idx(mounts, j), "mountPath"), TOKEN_MOUNT_PATH);
        if (has) continue;
        if (!mounts || !json_object_is_type(mounts, json_type_array)) kite_obj_set(c, "volumeMounts", mounts = json_object_new_array());
        json_object *m = json_object_new_object();
        kite_obj_set(m, "name", jstr(vol));
        kite_obj_set(m, "readOnly", json_object_new_boolean(true));
        kite_obj_set(m, "mountPath", jstr(TOKEN_MOUNT_PATH));
        json_object_array_add(mounts, m);
    }
}

/* mountServiceAccountToken: nothing when a volume of the kind is there already */
static void mount_token(json_object *spec) {
    json_object *vols = kite_obj_get(spec, "volumes");
    for (size_t i = 0; i < kite_array_len(vols); i++) {
        const char *n = kite_obj_str(json_object_array_get_idx(vols, i), "name");
        if (n && kite_startswith(n, TOKEN_VOLUME_PREFIX)) return;
    }
    char suffix[6], name[sizeof TOKEN_VOLUME_PREFIX + 5];
    random_suffix(suffix);
    snprintf(name, sizeof name, TOKEN_VOLUME_PREFIX "%s", suffix);
    if (!vols || !json_object_is_type(vols, json_type_array)) kite_obj_set(spec, "volumes", vols = json_object_new_array());
    json_object_array_add(vols, token_volume(name));
    mount_into(kite_obj_get(spec, "initContainers"), name);
    mount_into(kite_obj_get(spec, "containers"), name);
}

static bool bool_field(json_object *o, const char *k, bool *ret) {
    json_object *v = kite_obj_get(o, k);
    if (!v || !json_object_is_type(v, json_type_boolean)) return false;
    *ret = json_object_get_boolean(v);
    return true;
}

int kite_admission_service_account(const struct kite_admission_attrs *a, struct kite_admission_denial *d) {
    if (!is_pod(a)) return 0;
    json_object *spec = kite_obj_ensure(a->obj, "spec");
    const char *mirror = kite_obj_str(kite_obj_get(kite_obj_meta(a->obj), "annotations"), MIRROR_ANNOTATION);
    if (mirror) {
        const char *sa = kite_obj_str(spec, "serviceAccountName");
        if (sa && *sa) return kite_admission_forbid(a, d, "a mirror pod may not reference service accounts");
        return 0;
    }
    const char *name = kite_obj_str(spec, "serviceAccountName");
    if (!name || !*name) {
        kite_obj_set(spec, "serviceAccountName", jstr(DEFAULT_SA));
        name = DEFAULT_SA;
    }
    json_object *sa = kite_apiserver_lookup(a->srv, kite_registry_find("", "v1", "serviceaccounts"), a->ns, name);
    if (!sa) {
        if (strcmp(name, DEFAULT_SA) == 0) return 0;
        return kite_admission_forbid(a, d, "error looking up service account %s/%s: serviceaccount \"%s\" not found", a->ns,
                                name, name);
    }
    json_object *pull = kite_obj_get(sa, "imagePullSecrets");
    if (kite_array_len(pull) && !kite_array_len(kite_obj_get(spec, "imagePullSecrets"))) {
        json_object *copy = NULL;
        json_object_deep_copy(pull, &copy, NULL);
        kite_obj_set(spec, "imagePullSecrets", copy);
    }
    bool automount = true;
    if (!bool_field(spec, "automountServiceAccountToken", &automount)) bool_field(sa, "automountServiceAccountToken", &automount);
    json_object_put(sa);
    if (automount) mount_token(spec);
    return 0;
}
