/* The bootstrap token authenticator, as kube-apiserver's --enable-bootstrap-token-auth
 * (plugin/pkg/auth/authenticator/token/bootstrap): a bearer token `<id>.<secret>` is looked up
 * as the Secret kube-system/bootstrap-token-<id> of type bootstrap.kubernetes.io/token and,
 * when it matches, is not expired and is marked usage-bootstrap-authentication, is the user
 * system:bootstrap:<id> in system:bootstrappers and the Secret's auth-extra-groups. It runs
 * after the static tokens (the http layer) failed, on the watch cache's copy of the Secret
 * (decrypted, current), so a token made a moment ago authenticates at once. */
#include "apiserver/internal.h"
#include "base/base64.h"

#include <strings.h>

#include <stdio.h>

static bool all_of(const char *s, size_t n, const char *set) {
    for (size_t i = 0; i < n; i++)
        if (!s[i] || !strchr(set, s[i])) return false;
    return true;
}

#define ALNUM "abcdefghijklmnopqrstuvwxyz0123456789"

bool kite_bootstrap_token_split(const char *tok, char id[KITE_BOOTSTRAP_ID_LEN + 1],
                                char secret[KITE_BOOTSTRAP_SECRET_LEN + 1]) {
    if (!tok || strlen(tok) != KITE_BOOTSTRAP_ID_LEN + 1 + KITE_BOOTSTRAP_SECRET_LEN ||
        tok[KITE_BOOTSTRAP_ID_LEN] != '.' || !all_of(tok, KITE_BOOTSTRAP_ID_LEN, ALNUM) ||
        !all_of(tok + KITE_BOOTSTRAP_ID_LEN + 1, KITE_BOOTSTRAP_SECRET_LEN, ALNUM))
        return false;
    memcpy(id, tok, KITE_BOOTSTRAP_ID_LEN);
    id[KITE_BOOTSTRAP_ID_LEN] = 0;
    memcpy(secret, tok + KITE_BOOTSTRAP_ID_LEN + 1, KITE_BOOTSTRAP_SECRET_LEN + 1);
    return true;
}

/* A data key's decoded value (malloc'ed), or NULL. */
static char *data_value(json_object *secret, const char *key) {
    const char *b64 = kite_obj_str(kite_obj_get(secret, "data"), key);
    char *v = NULL;
    if (!b64 || kite_base64_decode(b64, &v, NULL) < 0) return NULL;
    return v;
}

/* Compares without leaking how many leading bytes matched. */
static bool same_secret(const char *a, const char *b) {
    size_t n = strlen(a);
    if (n != strlen(b)) return false;
    unsigned char d = 0;
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

/* bootstrapapi.BootstrapGroupPattern: system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9] */
static bool group_ok(const char *g) {
    static const char prefix[] = KITE_BOOTSTRAP_GROUP ":";
    size_t n = strlen(g), p = sizeof prefix - 1;
    if (strncmp(g, prefix, p) != 0 || n <= p || n - p > 256) return false;
    return all_of(g + p, n - p - 1, ALNUM ":-") && all_of(g + n - 1, 1, ALNUM);
}

int kite_bootstrap_token_check(json_object *secret, const char *id, const char *tok_secret, int64_t now_wall_ns,
                               struct kite_buf *ret_groups) {
    if (!secret || kite_meta_str(secret, "deletionTimestamp")) return -ENOENT;
    if (!kite_streq(kite_obj_str(secret, "type"), KITE_BOOTSTRAP_SECRET_TYPE)) return -EINVAL;
    _cleanup_free_ char *sid = data_value(secret, "token-id"), *ssec = data_value(secret, "token-secret");
    if (!sid || !ssec || !kite_streq(sid, id) || !same_secret(ssec, tok_secret)) return -EACCES;
    _cleanup_free_ char *exp = data_value(secret, "expiration");
    int64_t exp_ns;
    /* an unparsable expiration is treated as expired, as upstream's isSecretExpired */
    if (exp && (kite_time_parse(exp, &exp_ns) < 0 || exp_ns <= now_wall_ns)) return -ETIME;
    _cleanup_free_ char *usage = data_value(secret, "usage-bootstrap-authentication");
    if (!kite_streq(usage, "true")) return -EPERM;
    _cleanup_free_ char *extra = data_value(secret, "auth-extra-groups");
    kite_buf_puts(ret_groups, KITE_BOOTSTRAP_GROUP);
    kite_buf_putc(ret_groups, 0);
    char *save = NULL;
    for (char *g = extra ? strtok_r(extra, ",", &save) : NULL; g; g = strtok_r(NULL, ",", &save)) {
        while (*g == ' ') g++;
        size_t n = strlen(g);
        while (n && g[n - 1] == ' ') g[--n] = 0;
        if (!*g) continue;
        if (!group_ok(g)) return -EINVAL;
        kite_buf_puts(ret_groups, g);
        kite_buf_putc(ret_groups, 0);
    }
    return 0;
}

bool kite_apiserver_bootstrap_token(struct req *rq) {
    const char *auth = kite_http_header(rq->http, "Authorization");
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0) return false;
    const char *tok = auth + 7;
    while (*tok == ' ') tok++;
    char id[KITE_BOOTSTRAP_ID_LEN + 1], sec[KITE_BOOTSTRAP_SECRET_LEN + 1];
    if (!kite_bootstrap_token_split(tok, id, sec)) return false;
    char name[sizeof KITE_BOOTSTRAP_SECRET_PREFIX + KITE_BOOTSTRAP_ID_LEN];
    snprintf(name, sizeof name, KITE_BOOTSTRAP_SECRET_PREFIX "%s", id);
    json_object *secret = kite_apiserver_lookup(rq->srv, kite_registry_find("", "v1", "secrets"), "kube-system", name);
    /* one buffer owns the user's strings: the name, then each group, NUL-separated */
    struct kite_buf mem = {0};
    kite_buf_printf(&mem, KITE_BOOTSTRAP_USER_PREFIX "%s", id);
    kite_buf_putc(&mem, 0);
    size_t groups_at = mem.len;
    int r = kite_bootstrap_token_check(secret, id, sec, kite_now_wall(rq->srv->clock), &mem);
    json_object_put(secret);
    explicit_bzero(sec, sizeof sec);
    if (r < 0) {
        kite_buf_release(&mem);
        return false;
    }
    size_t len;
    rq->authn_mem = kite_buf_detach(&mem, &len);
    rq->user.name = rq->authn_mem;
    for (size_t at = groups_at; at < len && rq->user.n_groups < KITE_ARRAY_SIZE(rq->user.groups) - 1;
         at += strlen(rq->authn_mem + at) + 1)
        rq->user.groups[rq->user.n_groups++] = rq->authn_mem + at;
    return true;
}
