/* kite token create|list: bootstrap tokens as kubeadm makes them — a Secret
 * kube-system/bootstrap-token-<id> of type bootstrap.kubernetes.io/token, written through the
 * API with the data dir's admin credential (the running server owns the store). A joining
 * agent presents `<id>.<secret>` (kite agent --bootstrap-kubeconfig) and is
 * system:bootstrap:<id> in system:bootstrappers and the token's extra groups. */
#include "base/base64.h"
#include "api/registry.h"
#include "base/clock.h"
#include "client/client.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

#include <stdio.h>

#define SECRETS "/api/v1/namespaces/kube-system/secrets"
#define TOKEN_TYPE "bootstrap.kubernetes.io/token"
#define DEFAULT_GROUPS "system:bootstrappers:kubeadm:default-node-token"
#define ID_LEN 6
#define SECRET_LEN 16
#define CREATE_ATTEMPTS 5 /* a new id that is taken (409) is drawn again */

/* n characters of [a-z0-9], uniform: bytes at or past 252 (7 x 36) are drawn again. */
static void random_alnum(char *out, size_t n) {
    static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    for (size_t i = 0; i < n;) {
        unsigned char b;
        kite_random_bytes(&b, 1);
        if (b < 252) out[i++] = ALNUM[b % 36];
    }
    out[n] = 0;
}

static int admin_client(const char *data_dir, const char *kubeconfig, struct kite_client **ret) {
    _cleanup_free_ char *path = kubeconfig ? kite_strdup(kubeconfig) : kite_asprintf("%s/admin.kubeconfig", data_dir);
    struct kite_kubeconfig *kc = NULL;
    _cleanup_free_ char *err = NULL;
    int r = kite_kubeconfig_load(path, NULL, &kc, &err);
    if (r < 0) {
        fprintf(stderr, "kite token: %s\n", err ? err : strerror(-r));
        return r;
    }
    r = kite_client_new(kc, NULL, ret);
    kite_kubeconfig_free(kc);
    if (r < 0) fprintf(stderr, "kite token: %s: cannot use its server or credentials: %s\n", path, strerror(-r));
    return r;
}

static void set_str(json_object *o, const char *k, const char *v) { kite_obj_set(o, k, json_object_new_string(v)); }

static int token_create(const char *data_dir, const char *kubeconfig, int64_t ttl_ns, const char *description,
                        const char *groups) {
    struct kite_client *c = NULL;
    if (admin_client(data_dir, kubeconfig, &c) < 0) return 1;
    int rc = 1;
    for (int attempt = 0; attempt < CREATE_ATTEMPTS; attempt++) {
        char id[ID_LEN + 1], secret[SECRET_LEN + 1];
        random_alnum(id, ID_LEN);
        random_alnum(secret, SECRET_LEN);
        json_object *s = json_object_new_object(), *data = json_object_new_object();
        set_str(s, "apiVersion", "v1");
        set_str(s, "kind", "Secret");
        json_object *meta = kite_obj_ensure(s, "metadata");
        _cleanup_free_ char *name = kite_asprintf("bootstrap-token-%s", id);
        set_str(meta, "name", name);
        set_str(meta, "namespace", "kube-system");
        set_str(s, "type", TOKEN_TYPE);
        set_str(data, "token-id", id);
        set_str(data, "token-secret", secret);
        set_str(data, "usage-bootstrap-authentication", "true");
        set_str(data, "usage-bootstrap-signing", "true");
        if (*groups) set_str(data, "auth-extra-groups", groups);
        if (description && *description) set_str(data, "description", description);
        if (ttl_ns > 0) {
            char ts[21];
            kite_time_format(kite_now_wall(kite_clock_real()) + ttl_ns, ts);
            set_str(data, "expiration", ts);
        }
        kite_obj_set(s, "stringData", data);
        long code = 0;
        json_object *status = NULL;
        int e = kite_client_json(c, "POST", SECRETS, NULL, s, &code, &status);
        json_object_put(s);
        if (e == 0) {
            printf("%s.%s\n", id, secret);
            rc = 0;
        } else if (code != 409) {
            const char *msg = kite_obj_str(status, "message");
            fprintf(stderr, "kite token create: %s\n", msg ? msg : strerror(-e));
        }
        json_object_put(status);
        explicit_bzero(secret, sizeof secret);
        if (e == 0 || code != 409) break;
    }
    kite_client_free(c);
    return rc;
}

/* A data key's decoded value, or "" (malloc'ed). */
static char *data_value(json_object *secret, const char *key) {
    const char *b64 = kite_obj_str(kite_obj_get(secret, "data"), key);
    char *v = NULL;
    if (!b64 || kite_base64_decode(b64, &v, NULL) < 0) return kite_strdup("");
    return v;
}

/* kubeadm token list's columns */
static int token_list(const char *data_dir, const char *kubeconfig) {
    struct kite_client *c = NULL;
    if (admin_client(data_dir, kubeconfig, &c) < 0) return 1;
    json_object *list = NULL;
    int e = kite_client_json(c, "GET", SECRETS "?fieldSelector=type%3D" "bootstrap.kubernetes.io%2Ftoken", NULL, NULL, NULL, &list);
    kite_client_free(c);
    if (e < 0) {
        const char *msg = kite_obj_str(list, "message");
        fprintf(stderr, "kite token list: %s\n", msg ? msg : strerror(-e));
        json_object_put(list);
        return 1;
    }
    printf("%-24s %-8s %-21s %-26s %-20s %s\n", "TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION", "EXTRA GROUPS");
    json_object *items = kite_obj_get(list, "items");
    int64_t now = kite_now_wall(kite_clock_real());
    for (size_t i = 0; items && i < json_object_array_length(items); i++) {
        json_object *s = json_object_array_get_idx(items, i);
        _cleanup_free_ char *id = data_value(s, "token-id"), *sec = data_value(s, "token-secret"),
                            *exp = data_value(s, "expiration"), *desc = data_value(s, "description"),
                            *groups = data_value(s, "auth-extra-groups"), *ua = data_value(s, "usage-bootstrap-authentication"),
                            *us = data_value(s, "usage-bootstrap-signing");
        char ttl[32] = "<forever>";
        int64_t exp_ns;
        if (*exp && kite_time_parse(exp, &exp_ns) == 0) {
            if (exp_ns <= now) snprintf(ttl, sizeof ttl, "<invalid>");
            else kite_human_duration((exp_ns - now) / KITE_NS_PER_SEC, ttl);
        }
        char usages[40];
        snprintf(usages, sizeof usages, "%s%s%s", kite_streq(ua, "true") ? "authentication" : "",
                 kite_streq(ua, "true") && kite_streq(us, "true") ? "," : "", kite_streq(us, "true") ? "signing" : "");
        _cleanup_free_ char *tok = kite_asprintf("%s.%s", id, sec);
        printf("%-24s %-8s %-21s %-26s %-20s %s\n", tok, ttl, *exp ? exp : "<never>", *usages ? usages : "<none>",
               *desc ? desc : "<none>", groups);
        explicit_bzero(sec, strlen(sec));
    }
    json_object_put(list);
    return 0;
}

int cmd_token(int argc, char **argv) {
    const char *data_dir = NULL, *kubeconfig = NULL, *description = NULL, *groups = DEFAULT_GROUPS;
    int64_t ttl_ns = 24 * 3600 * KITE_NS_PER_SEC;
    const struct flag flags[] = {
        FLAG_STR("data-dir", "DIR", "data directory of the apiserver (its admin.kubeconfig is used)", NULL, &data_dir),
        FLAG_STR("kubeconfig", "FILE", "an admin kubeconfig instead of DATA_DIR/admin.kubeconfig", NULL, &kubeconfig),
        FLAG_DURATION("ttl", "create: how long the token authenticates (0: forever)", "24h", 0, &ttl_ns),
        FLAG_STR("description", "TEXT", "create: a description kept with the token", NULL, &description),
        FLAG_STR("groups", "G,...", "create: extra groups (each system:bootstrappers:...)", DEFAULT_GROUPS, &groups),
        FLAG_END,
    };
    const char *verb = argc > 1 ? argv[1] : NULL;
    if (!verb || (strcmp(verb, "create") != 0 && strcmp(verb, "list") != 0)) {
        if (verb && (strcmp(verb, "-h") == 0 || strcmp(verb, "--help") == 0)) {
            printf("usage: kite token create|list --data-dir DIR [flags]\n");
            return 0;
        }
        fprintf(stderr, "kite token: create or list (kite token create --data-dir DIR [--ttl D] [--description S])\n");
        return 2;
    }
    int r = kite_cmd_flags_parse(strcmp(verb, "create") == 0 ? "token create" : "token list",
                        "Creates (prints <id>.<secret>) or lists bootstrap tokens: Secrets kube-system/bootstrap-token-<id>.",
                        flags, argc - 1, argv + 1, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    if (!data_dir && !kubeconfig) {
        fprintf(stderr, "kite token: --data-dir (or --kubeconfig) is required\n");
        return 2;
    }
    return strcmp(verb, "create") == 0 ? token_create(data_dir, kubeconfig, ttl_ns, description, groups)
                                       : token_list(data_dir, kubeconfig);
}
