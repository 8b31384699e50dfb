#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "client/client.h"
#include "base/base64.h"
#include "client/kubeconfig.h"
#include "api/yaml.h"

static json_object *yaml(const char *s) {
    json_object *o = NULL;
    char *err = NULL;
    int r = kite_yaml_parse(s, strlen(s), &o, &err);
    cr_assert_eq(r, 0, "yaml: %s", err ? err : "");
    free(err);
    return o;
}

Test(yaml, scalars_typed_only_when_plain) {
    json_object *o = yaml("a: 1\nb: \"1\"\nc: true\nd: 'true'\ne: ~\nf: [x, 2]\ng: 10s\n");
    const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
    cr_assert_str_eq(s, "{\"a\":1,\"b\":\"1\",\"c\":true,\"d\":\"true\",\"e\":null,\"f\":[\"x\",2],\"g\":\"10s\"}");
    json_object_put(o);
}

Test(yaml, syntax_error_names_line) {
    json_object *o = NULL;
    char *err = NULL;
    cr_assert_eq(kite_yaml_parse("a: 1\nb: [\n", 10, &o, &err), -EINVAL);
    cr_assert(err && strstr(err, "line"), "%s", err);
    free(err);
}

Test(yaml, alias_bomb_rejected) {
    const char *s = "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
                    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
                    "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]\n";
    json_object *o = NULL;
    cr_assert_eq(kite_yaml_parse(s, strlen(s), &o, NULL), -EFBIG);
}

Test(base64, decode) {
    struct { const char *in, *out; int r; } cases[] = {
        {"aGVsbG8=", "hello", 0}, {"aGVsbG8", "hello", 0}, {"aGVs\nbG8=", "hello", 0},
        {"", "", 0},              {"a$==", NULL, -EINVAL}, {"aGVsbG8=x", NULL, -EINVAL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *o = NULL;
        size_t n;
        int r = kite_base64_decode(cases[i].in, &o, &n);
        cr_assert_eq(r, cases[i].r, "case %zu", i);
        if (!r) cr_assert_str_eq(o, cases[i].out, "case %zu", i);
        free(o);
    }
}

#define KC_HEAD                                                                                     \
    "apiVersion: v1\nkind: Config\ncurrent-context: main\n"                                         \
    "contexts:\n- name: other\n  context: {cluster: c2, user: u2}\n"                                \
    "- name: main\n  context:\n    cluster: c1\n    user: u1\n"

Test(kubeconfig, data_fields) {
    json_object *o = yaml(KC_HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443/\n"
                                  "    certificate-authority-data: Q0EtUEVN\n"
                                  "users:\n- name: u1\n  user:\n    client-certificate-data: Q0VSVA==\n"
                                  "    client-key-data: S0VZ\n");
    struct kite_kubeconfig *k = NULL;
    char *err = NULL;
    cr_assert_eq(kite_kubeconfig_from_json(o, NULL, NULL, &k, &err), 0, "%s", err ? err : "");
    cr_assert_str_eq(k->server, "https://127.0.0.1:6443");
    cr_assert_str_eq(k->ca_pem, "CA-PEM");
    cr_assert_str_eq(k->cert_pem, "CERT");
    cr_assert_str_eq(k->key_pem, "KEY");
    cr_assert_eq(k->key_len, 3);
    cr_assert_not(k->insecure);
    cr_assert_null(k->token);
    cr_assert_str_eq(k->context, "main");
    kite_kubeconfig_free(k);
    json_object_put(o);
}

Test(kubeconfig, file_fields_relative_to_kubeconfig_dir) {
    char dir[] = "/tmp/kite-kc-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256];
    struct { const char *name, *content; } files[] = {
        {"ca.crt", "CAFILE"}, {"c.crt", "CERTFILE"}, {"c.key", "KEYFILE"}, {"tok", "sekrit\n"},
        {"kc", KC_HEAD "clusters:\n- name: c1\n  cluster:\n    server: https://h:1\n"
               "    certificate-authority: ca.crt\n"
               "users:\n- name: u1\n  user:\n    client-certificate: c.crt\n    client-key: c.key\n"
               "    tokenFile: tok\n"},
    };
    for (size_t i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
        FILE *f = fopen(path, "w");
        fputs(files[i].content, f);
        fclose(f);
    }
    struct kite_kubeconfig *k = NULL;
    char *err = NULL;
    cr_assert_eq(kite_kubeconfig_load(path, NULL, &k, &err), 0, "%s", err ? err : "");
    cr_assert_str_eq(k->ca_pem, "CAFILE");
    cr_assert_str_eq(k->cert_pem, "CERTFILE");
    cr_assert_str_eq(k->key_pem, "KEYFILE");
    cr_assert_str_eq(k->token, "sekrit");
    kite_kubeconfig_free(k);
    for (size_t i = 0; i < 5; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i].name);
        unlink(path);
    }
    rmdir(dir);
}

Test(kubeconfig, token_and_insecure_and_context_override) {
    json_object *o = yaml(KC_HEAD "clusters:\n- name: c2\n  cluster:\n    server: http://10.0.0.1:8080\n"
                                  "    insecure-skip-tls-verify: true\n"
                                  "users:\n- name: u2\n  user:\n    token: abc.def\n");
    struct kite_kubeconfig *k = NULL;
    cr_assert_eq(kite_kubeconfig_from_json(o, "other", NULL, &k, NULL), 0);
    cr_assert(k->insecure);
    cr_assert_str_eq(k->token, "abc.def");
    cr_assert_null(k->cert_pem);
    cr_assert_str_eq(k->server, "http://10.0.0.1:8080");
    kite_kubeconfig_free(k);
    json_object_put(o);
}

Test(kubeconfig, errors_name_the_problem) {
    struct { const char *yaml, *ctx, *msg; int r; } cases[] = {
        {"apiVersion: v1\n", NULL, "current-context", -EINVAL},
        {KC_HEAD "clusters: []\n", NULL, "cluster \"c1\" not found", -ENOENT},
        {KC_HEAD, "nope", "context \"nope\" not found", -ENOENT},
        {KC_HEAD "clusters:\n- name: c1\n  cluster: {server: ftp://x}\n", NULL, "not an http", -EINVAL},
        {KC_HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://x', certificate-authority-data: '%%%'}\n",
         NULL, "certificate-authority-data", -EINVAL},
        {KC_HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://x'}\nusers:\n- name: u1\n  user:\n"
                 "    client-certificate-data: QQ==\n",
         NULL, "together", -EINVAL},
        {KC_HEAD "clusters:\n- name: c1\n  cluster: {server: 'https://x'}\nusers:\n- name: u1\n  user:\n"
                 "    exec: {command: foo}\n",
         NULL, "exec", -EOPNOTSUPP},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_object *o = yaml(cases[i].yaml);
        struct kite_kubeconfig *k = NULL;
        char *err = NULL;
        cr_assert_eq(kite_kubeconfig_from_json(o, cases[i].ctx, NULL, &k, &err), cases[i].r, "case %zu", i);
        cr_assert_null(k);
        cr_assert(err && strstr(err, cases[i].msg), "case %zu: %s", i, err ? err : "(null)");
        free(err);
        json_object_put(o);
    }
}

struct collected {
    char lines[8][64];
    int n;
};
static int collect(char *line, size_t len, void *ud) {
    struct collected *c = ud;
    cr_assert_eq(strlen(line), len);
    snprintf(c->lines[c->n++], 64, "%s", line);
    return 0;
}

Test(watch, line_splitting_across_chunks) {
    struct kite_lines l;
    kite_lines_init(&l, 32);
    struct collected c = {0};
    const char *chunks[] = {"{\"a\":1}\n{\"b\"", ":2}\r\n\n", "{\"c\":3}", "\n{\"d\":4}\n"};
    for (size_t i = 0; i < 4; i++) cr_assert_eq(kite_lines_feed(&l, chunks[i], strlen(chunks[i]), collect, &c), 0);
    cr_assert_eq(c.n, 4);
    cr_assert_str_eq(c.lines[0], "{\"a\":1}");
    cr_assert_str_eq(c.lines[1], "{\"b\":2}");
    cr_assert_str_eq(c.lines[2], "{\"c\":3}");
    cr_assert_str_eq(c.lines[3], "{\"d\":4}");
    /* a line longer than the limit, even split across feeds, is refused */
    cr_assert_eq(kite_lines_feed(&l, "0123456789012345678901234", 25, collect, &c), 0);
    cr_assert_eq(kite_lines_feed(&l, "0123456789", 10, collect, &c), -EMSGSIZE);
    kite_lines_release(&l);
}

static int stop_at_second(char *line, size_t len, void *ud) { return ++*(int *)ud == 2 ? -EINTR : 0; }

Test(watch, callback_stops_feed) {
    struct kite_lines l;
    kite_lines_init(&l, 100);
    int n = 0;
    cr_assert_eq(kite_lines_feed(&l, "a\nb\nc\n", 6, stop_at_second, &n), -EINTR);
    cr_assert_eq(n, 2);
    kite_lines_release(&l);
}

Test(errors, http_status_mapping) {
    struct { long s; int e; } cases[] = {{200, 0}, {201, 0}, {400, -EINVAL}, {401, -EACCES}, {403, -EPERM},
                                         {404, -ENOENT}, {409, -EEXIST}, {410, -ESTALE}, {422, -EINVAL},
                                         {429, -EAGAIN}, {500, -EIO}, {503, -EAGAIN}, {504, -ETIMEDOUT},
                                         {418, -EPROTO}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cr_assert_eq(kite_http_status_errno(cases[i].s), cases[i].e, "status %ld", cases[i].s);
}

Test(transport, connection_refused_is_errno) {
    /* port 1 on loopback: nothing listens there, so connect() is refused at once */
    struct kite_kubeconfig kc = {.server = "http://127.0.0.1:1"};
    struct kite_client *c = NULL;
    cr_assert_eq(kite_client_new(&kc, NULL, &c), 0);
    long status = -1;
    cr_assert_eq(kite_client_json(c, "GET", "/api/v1/nodes", NULL, NULL, &status, NULL), -ECONNREFUSED);
    cr_assert_eq(status, 0);
    kite_client_reset_connections(c);
    struct kite_cancel cancel;
    kite_cancel_init(&cancel);
    cr_assert_eq(kite_client_watch(c, "/api/v1/nodes?watch=true", NULL, NULL, &cancel), -ECONNREFUSED);
    kite_cancel_fire(&cancel);
    cr_assert_eq(kite_client_watch(c, "/api/v1/nodes?watch=true", NULL, NULL, &cancel), -ECANCELED);
    kite_cancel_release(&cancel);
    kite_client_free(c);
}

static int fake_h(void *ud, const char *method, const char *path, const char *ct, const char *body, size_t len,
                  struct kite_response *ret) {
    if (kite_streq(path, "/down")) return -ECONNREFUSED;
    ret->status = kite_streq(path, "/missing") ? 404 : 200;
    ret->body = kite_strdup(ret->status == 404 ? "{\"kind\":\"Status\",\"code\":404}" : "{\"ok\":true}");
    return 0;
}

Test(fake, json_helper_maps_codes) {
    struct kite_client *c = kite_client_fake_new(fake_h, NULL, NULL);
    json_object *o = NULL;
    long st;
    cr_assert_eq(kite_client_json(c, "GET", "/x", NULL, NULL, &st, &o), 0);
    cr_assert_eq(st, 200);
    cr_assert(json_object_get_boolean(json_object_object_get(o, "ok")));
    json_object_put(o);
    cr_assert_eq(kite_client_json(c, "GET", "/missing", NULL, NULL, &st, &o), -ENOENT);
    cr_assert_eq(st, 404);
    cr_assert_eq(json_object_get_int(json_object_object_get(o, "code")), 404);
    json_object_put(o);
    cr_assert_eq(kite_client_json(c, "GET", "/down", NULL, NULL, &st, NULL), -ECONNREFUSED);
    cr_assert_eq(st, 0);
    cr_assert_eq(kite_client_bytes_sent(c), strlen("GET/x") + strlen("GET/missing") + strlen("GET/down"));
    kite_client_reset_connections(c);
    cr_assert_eq(kite_client_fake_resets(c), 1);
    kite_client_free(c);
}

static bool gate_open;
static bool gate(void *ud) {
    (*(int *)ud)++;
    return gate_open;
}

Test(fake, write_gate_holds_back_writes_only) {
    struct kite_client *c = kite_client_fake_new(fake_h, NULL, NULL);
    int asked = 0;
    kite_client_set_write_gate(c, gate, &asked);
    gate_open = false;
    cr_assert_eq(kite_client_json(c, "GET", "/x", NULL, NULL, NULL, NULL), 0, "reads pass");
    cr_assert_eq(asked, 0, "reads do not ask");
    const char *writes[] = {"POST", "PUT", "PATCH", "DELETE"};
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(kite_client_json(c, writes[i], "/x", NULL, NULL, NULL, NULL), KITE_CLIENT_NOT_LEADING, "%s", writes[i]);
    cr_assert_eq(asked, 4);
    cr_assert_eq(kite_client_bytes_sent(c), strlen("GET/x"), "nothing refused was sent");
    gate_open = true;
    cr_assert_eq(kite_client_json(c, "POST", "/x", NULL, NULL, NULL, NULL), 0);
    kite_client_set_write_gate(c, NULL, NULL);
    gate_open = false;
    cr_assert_eq(kite_client_json(c, "DELETE", "/x", NULL, NULL, NULL, NULL), 0, "no gate, no check");
    kite_client_free(c);
}
