/* ServiceAccount JWTs (src/apiserver/satoken.c over src/pki/jws.c): signing and verifying
 * (RS256 with the key the server makes, ES256 with a P-256 key), every way a token is refused
 * (shape, algorithm, signature, another key), and the claims' judgement (issuer, expiry and
 * not-before with go-jose's minute of leeway, audience, subject). */
#include "apiserver/internal.h"
#include "base/base64.h"
#include "pki/pki.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define ISS KITE_SATOKEN_ISSUER_DEFAULT
#define NOW 1893553445 /* 2030-01-02T03:04:05Z */

static struct kite_pki_signer *rsa_signer(void) {
    char dir[] = "/tmp/kite-satoken-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *path = kite_asprintf("%s/sa.key", dir), *pem = NULL;
    cr_assert_eq(kite_pki_sa_key_ensure(path, &pem), 0);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    /* a second start reads the same key */
    char *again = NULL;
    cr_assert_eq(kite_pki_sa_key_ensure(path, &again), 0);
    cr_assert_str_eq(again, pem);
    free(again);
    struct kite_pki_signer *s = NULL;
    cr_assert_eq(kite_pki_signer_new(pem, &s), 0);
    free(pem);
    unlink(path);
    free(path);
    rmdir(dir);
    return s;
}

static json_object *subject_claims(int64_t now, int64_t exp_s, const char *aud) {
    struct kite_satoken_subject sub = {.ns = "team", .name = "builder", .uid = "sa-uid", .pod_name = "web-1",
                                       .pod_uid = "pod-uid", .node_name = "n1", .node_uid = "node-uid"};
    json_object *auds = json_object_new_array();
    json_object_array_add(auds, json_object_new_string(aud));
    json_object *c = kite_satoken_claims(&sub, ISS, auds, now, exp_s);
    json_object_put(auds);
    return c;
}

static json_object *decode_part(const char *tok, int idx) {
    const char *p = tok;
    for (int i = 0; i < idx; i++) p = strchr(p, '.') + 1;
    size_t n = strcspn(p, ".");
    char *text = kite_strndup(p, n), *raw = NULL;
    cr_assert_eq(kite_base64_decode(text, &raw, NULL), 0);
    json_object *o = json_tokener_parse(raw);
    free(text);
    free(raw);
    return o;
}

Test(satoken, claims_shape) {
    json_object *c = subject_claims(NOW, 3607, "api");
    const char *text = json_object_to_json_string_ext(c, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    /* upstream's names and nesting; iat = nbf = now, exp = now + 3607 */
    cr_expect(strstr(text, "\"aud\":[\"api\"]"), "%s", text);
    cr_expect(strstr(text, "\"exp\":1893557052"), "%s", text);
    cr_expect(strstr(text, "\"iat\":1893553445"), "%s", text);
    cr_expect(strstr(text, "\"nbf\":1893553445"), "%s", text);
    cr_expect(strstr(text, "\"iss\":\"" ISS "\""), "%s", text);
    cr_expect(strstr(text, "\"sub\":\"system:serviceaccount:team:builder\""), "%s", text);
    cr_expect(strstr(text, "\"kubernetes.io\":{\"namespace\":\"team\",\"node\":{\"name\":\"n1\",\"uid\":\"node-uid\"},"
                           "\"pod\":{\"name\":\"web-1\",\"uid\":\"pod-uid\"},\"serviceaccount\":{\"name\":\"builder\","
                           "\"uid\":\"sa-uid\"}}"),
              "%s", text);
    cr_expect_eq(strlen(kite_obj_str(c, "jti")), 36);
    json_object_put(c);
}

Test(satoken, sign_and_verify_rs256) {
    struct kite_pki_signer *k = rsa_signer();
    cr_assert_str_eq(kite_pki_signer_alg(k), "RS256");
    cr_assert_eq(strlen(kite_pki_signer_kid(k)), 43); /* base64url of 32 bytes */
    json_object *c = subject_claims(NOW, 3600, "api");
    char *tok = kite_jwt_sign(k, c);
    cr_assert_not_null(tok);
    json_object *h = decode_part(tok, 0);
    cr_expect_str_eq(kite_obj_str(h, "alg"), "RS256");
    cr_expect_str_eq(kite_obj_str(h, "kid"), kite_pki_signer_kid(k));
    json_object_put(h);
    json_object *back = NULL;
    cr_assert_eq(kite_jwt_verify(k, tok, &back), 0);
    cr_expect(json_object_equal(back, c));
    json_object_put(back);

    /* a changed payload, a changed signature, no signature, extra parts */
    char *dot1 = strchr(tok, '.'), *dot2 = strchr(dot1 + 1, '.');
    char *bad = kite_strdup(tok);
    bad[dot1 - tok + 5] = bad[dot1 - tok + 5] == 'A' ? 'B' : 'A';
    cr_expect_eq(kite_jwt_verify(k, bad, &back), -EBADMSG);
    free(bad);
    bad = kite_strdup(tok);
    size_t n = strlen(bad);
    bad[n - 3] = bad[n - 3] == 'A' ? 'B' : 'A';
    cr_expect_eq(kite_jwt_verify(k, bad, &back), -EBADMSG);
    free(bad);
    bad = kite_strndup(tok, (size_t)(dot2 - tok) + 1);
    cr_expect_eq(kite_jwt_verify(k, bad, &back), -EINVAL);
    free(bad);
    bad = kite_asprintf("%s.x", tok);
    cr_expect_eq(kite_jwt_verify(k, bad, &back), -EINVAL);
    free(bad);
    bad = kite_asprintf("%s=", tok); /* padding is no base64url character of a JWS */
    cr_expect_eq(kite_jwt_verify(k, bad, &back), -EINVAL);
    free(bad);
    cr_expect_eq(kite_jwt_verify(k, "a.b", &back), -EINVAL);
    cr_expect_eq(kite_jwt_verify(k, "", &back), -EINVAL);

    /* alg none with the real payload, HS256 with it */
    char *payload = kite_strndup(dot1 + 1, (size_t)(dot2 - dot1 - 1));
    static const char *const algs[] = {"{\"alg\":\"none\"}", "{\"alg\":\"HS256\"}", "{\"alg\":\"ES256\"}"};
    for (size_t i = 0; i < KITE_ARRAY_SIZE(algs); i++) {
        char *hb = kite_base64_encode(algs[i], strlen(algs[i]), true);
        bad = kite_asprintf("%s.%s.%s", hb, payload, dot2 + 1);
        cr_expect_eq(kite_jwt_verify(k, bad, &back), -EBADMSG, "%s", algs[i]);
        free(bad);
        free(hb);
    }
    free(payload);

    /* another key's signature */
    struct kite_pki_signer *other = rsa_signer();
    cr_expect_eq(kite_jwt_verify(other, tok, &back), -EBADMSG);
    kite_pki_signer_free(other);

    /* too long to be tried */
    char *big = kite_malloc(KITE_SATOKEN_MAX_BYTES + 2);
    memset(big, 'a', KITE_SATOKEN_MAX_BYTES + 1);
    big[KITE_SATOKEN_MAX_BYTES + 1] = 0;
    big[10] = '.', big[20] = '.';
    cr_expect_eq(kite_jwt_verify(k, big, &back), -EINVAL);
    free(big);
    free(tok);
    json_object_put(c);
    kite_pki_signer_free(k);
}

Test(satoken, es256) {
    char *cert = NULL, *key = NULL;
    static const char *const sans[] = {"x"};
    cr_assert_eq(kite_pki_self_signed("x", sans, 1, &cert, &key), 0); /* an ECDSA P-256 key */
    struct kite_pki_signer *k = NULL;
    cr_assert_eq(kite_pki_signer_new(key, &k), 0);
    cr_assert_str_eq(kite_pki_signer_alg(k), "ES256");
    json_object *c = subject_claims(NOW, 3600, "api"), *back = NULL;
    for (int i = 0; i < 20; i++) { /* r and s of every length: leading zeros are kept in 32 bytes */
        char *tok = kite_jwt_sign(k, c);
        cr_assert_not_null(tok);
        size_t sig_len = 0;
        char *sig = NULL;
        cr_assert_eq(kite_base64_decode(strrchr(tok, '.') + 1, &sig, &sig_len), 0);
        cr_expect_eq(sig_len, 64);
        free(sig);
        cr_assert_eq(kite_jwt_verify(k, tok, &back), 0);
        json_object_put(back);
        free(tok);
    }
    struct kite_pki_signer *none = NULL;
    cr_expect_eq(kite_pki_signer_new("not a key", &none), -EINVAL);
    cr_expect_null(none);
    json_object_put(c);
    kite_pki_signer_free(k);
    free(cert);
    free(key);
}

Test(satoken, check_claims) {
    const char *auds[] = {ISS, "other"};
    struct kite_satoken_subject s;
    json_object *c = subject_claims(NOW, 3600, ISS);
    cr_assert_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW, &s), 0);
    cr_expect_str_eq(s.ns, "team");
    cr_expect_str_eq(s.name, "builder");
    cr_expect_str_eq(s.uid, "sa-uid");
    cr_expect_str_eq(s.pod_name, "web-1");
    cr_expect_str_eq(s.pod_uid, "pod-uid");
    cr_expect_str_eq(s.node_name, "n1");
    cr_expect_null(s.secret_name);
    /* expiry with a minute of leeway */
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW + 3600 + 60, &s), 0);
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW + 3600 + 61, &s), -ETIME);
    /* not valid yet */
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW - 60, &s), 0);
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW - 61, &s), -EAGAIN);
    /* another issuer: not this authenticator's token */
    cr_expect_eq(kite_satoken_check_claims(c, "https://elsewhere", auds, 2, NOW, &s), -ENOENT);
    /* the audience: one of the server's, as an array or a string */
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds + 1, 1, NOW, &s), -EACCES);
    kite_obj_set(c, "aud", json_object_new_string("other"));
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW, &s), 0);
    kite_obj_set(c, "aud", json_object_new_array());
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW, &s), -EACCES);
    kite_obj_set(c, "aud", json_object_new_string(ISS));
    /* the subject must be the private claims' ServiceAccount */
    kite_obj_set(c, "sub", json_object_new_string("system:serviceaccount:team:admin"));
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW, &s), -EINVAL);
    kite_obj_set(c, "sub", json_object_new_string("system:serviceaccount:team:builder"));
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW, &s), 0);
    json_object_object_del(c, "kubernetes.io");
    cr_expect_eq(kite_satoken_check_claims(c, ISS, auds, 2, NOW, &s), -EINVAL);
    json_object_put(c);
}
