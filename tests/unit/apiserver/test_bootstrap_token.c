/* Bootstrap tokens (src/apiserver/bootstrap_token.c): the token's shape and what a Secret
 * must hold to authenticate it, as upstream's bootstrap token authenticator. */
#include "apiserver/internal.h"
#include "base/base64.h"

#include <criterion/criterion.h>
#include <stdio.h>

Test(bootstrap_token, shape) {
    static const struct {
        const char *tok;
        bool ok;
    } CASES[] = {
        {"abcdef.0123456789abcdef", true},
        {"abc123.zzzzzzzzzzzzzzzz", true},
        {"ABCDEF.0123456789abcdef", false}, /* upper case */
        {"abcdef.0123456789abcde", false},  /* secret too short */
        {"abcdef.0123456789abcdef0", false},
        {"abcde.0123456789abcdef0", false},
        {"abcdef-0123456789abcdef", false},
        {"abcdef.0123456789abcd_f", false},
        {"", false},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CASES); i++) {
        char id[7], sec[17];
        cr_expect_eq(kite_bootstrap_token_split(CASES[i].tok, id, sec), CASES[i].ok, "%s", CASES[i].tok);
        if (CASES[i].ok) {
            cr_expect_eq(strncmp(id, CASES[i].tok, 6), 0);
            cr_expect_str_eq(sec, CASES[i].tok + 7);
        }
    }
}

#define NOW INT64_C(1893553445000000000) /* 2030-01-02T03:04:05Z */

/* A token Secret; a NULL value leaves the key out. */
static json_object *secret(const char *type, const char *id, const char *sec, const char *expiration, const char *auth,
                           const char *groups) {
    json_object *s = json_object_new_object(), *data = json_object_new_object();
    kite_obj_set(s, "type", json_object_new_string(type));
    const char *keys[] = {"token-id", "token-secret", "expiration", "usage-bootstrap-authentication", "auth-extra-groups"};
    const char *vals[] = {id, sec, expiration, auth, groups};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(keys); i++) {
        if (!vals[i]) continue;
        char *b = kite_base64_encode(vals[i], strlen(vals[i]), false);
        kite_obj_set(data, keys[i], json_object_new_string(b));
        free(b);
    }
    kite_obj_set(s, "data", data);
    return s;
}

#define T "bootstrap.kubernetes.io/token"
#define G "system:bootstrappers:kubeadm:default-node-token"

Test(bootstrap_token, check_table) {
    static const struct {
        const char *type, *id, *sec, *exp, *auth, *groups;
        int want;
        const char *want_groups; /* '|'-separated */
    } CASES[] = {
        {T, "abcdef", "0123456789abcdef", "2030-01-03T00:00:00Z", "true", G, 0, "system:bootstrappers|" G},
        {T, "abcdef", "0123456789abcdef", NULL, "true", NULL, 0, "system:bootstrappers"}, /* no expiry, no extras */
        {T, "abcdef", "0123456789abcdef", NULL, "true", " system:bootstrappers:a , system:bootstrappers:b-c", 0,
         "system:bootstrappers|system:bootstrappers:a|system:bootstrappers:b-c"},
        {T, "abcdef", "fedcba9876543210", NULL, "true", NULL, -EACCES, NULL},          /* wrong secret */
        {T, "zzzzzz", "0123456789abcdef", NULL, "true", NULL, -EACCES, NULL},          /* id mismatch */
        {T, "abcdef", "0123456789abcdef", "2030-01-02T03:04:05Z", "true", NULL, -ETIME, NULL}, /* expired now */
        {T, "abcdef", "0123456789abcdef", "not a time", "true", NULL, -ETIME, NULL},
        {T, "abcdef", "0123456789abcdef", NULL, "false", NULL, -EPERM, NULL},          /* not for authentication */
        {T, "abcdef", "0123456789abcdef", NULL, NULL, NULL, -EPERM, NULL},
        {"Opaque", "abcdef", "0123456789abcdef", NULL, "true", NULL, -EINVAL, NULL},   /* wrong type */
        {T, "abcdef", "0123456789abcdef", NULL, "true", "system:masters", -EINVAL, NULL}, /* escalation */
        {T, "abcdef", "0123456789abcdef", NULL, "true", "system:bootstrappers:", -EINVAL, NULL},
        {T, "abcdef", "0123456789abcdef", NULL, "true", "system:bootstrappers:x-", -EINVAL, NULL},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(CASES); i++) {
        json_object *s = secret(CASES[i].type, CASES[i].id, CASES[i].sec, CASES[i].exp, CASES[i].auth, CASES[i].groups);
        struct kite_buf g = {0};
        int r = kite_bootstrap_token_check(s, "abcdef", "0123456789abcdef", NOW, &g);
        cr_expect_eq(r, CASES[i].want, "case %zu: %d", i, r);
        if (r == 0) {
            for (size_t k = 0; k < g.len; k++)
                if (g.p[k] == 0) g.p[k] = '|';
            if (g.len) g.p[g.len - 1] = 0;
            cr_expect_str_eq(g.p, CASES[i].want_groups, "case %zu", i);
        }
        kite_buf_release(&g);
        json_object_put(s);
    }
    cr_expect_eq(kite_bootstrap_token_check(NULL, "abcdef", "0123456789abcdef", NOW, &(struct kite_buf){0}), -ENOENT);
}
