#include "harness.h"
#include "base/buf.h"
#include "controllers/controllers.h"
#include "json/parse.h"

#include <criterion/criterion.h>
#include <curl/curl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

struct api api;
const char *const *api_headers;
const char *api_audit_file;
int64_t api_audit_maxsize_mb, api_audit_maxbackup;

void api_start_ttl(int64_t event_ttl_s) {
    memset(&api, 0, sizeof api);
    struct stat st;
    /* an in-memory file system keeps the store's fsyncs cheap */
    const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(api.dir, sizeof api.dir, "%s/kite-apiserver-XXXXXX", base);
    cr_assert_not_null(mkdtemp(api.dir), "mkdtemp %s", api.dir);
    kite_fake_clock_init(&api.clock, API_T0_S * KITE_NS_PER_SEC);
    _cleanup_free_ char *data = kite_asprintf("%s/data", api.dir);
    _cleanup_free_ char *audit = api_audit_file ? kite_asprintf("%s/%s", api.dir, api_audit_file) : NULL;
    api_headers = NULL;
    /* the controllers' ClusterRoles, as kite apiserver and kite up pass them (one per descriptor row) */
    static struct kite_apiserver_role roles[64];
    size_t n_roles = KITE_MIN(KITE_N_CONTROLLERS, KITE_ARRAY_SIZE(roles));
    for (size_t i = 0; i < n_roles; i++)
        roles[i] = (struct kite_apiserver_role){kite_controllers_role(i), KITE_CONTROLLERS[i].rbac, KITE_CTL_USER};
    struct kite_apiserver_options o = {
        .controller_roles = roles, .n_controller_roles = n_roles,
        .data_dir = data, .listen = "127.0.0.1:0", .threads = 2, .event_ttl_s = event_ttl_s, .clock = &api.clock.clock,
        .audit_log_path = audit, .audit_log_maxsize_mb = api_audit_maxsize_mb, .audit_log_maxbackup = api_audit_maxbackup,
    };
    char *err = NULL;
    int r = kite_apiserver_start(&o, &api.srv, &err);
    cr_assert_eq(r, 0, "kite_apiserver_start: %d %s", r, err ? err : "");
    api.ca = kite_asprintf("%s/pki/ca.crt", data);
    api.cert = kite_asprintf("%s/pki/admin.crt", data);
    api.key = kite_asprintf("%s/pki/admin.key", data);
    api.curl = curl_easy_init();
    cr_assert_not_null(api.curl);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) { return remove(path); }

void api_stop(void) {
    if (api.curl) curl_easy_cleanup(api.curl);
    kite_apiserver_stop(api.srv);
    nftw(api.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(api.ca);
    free(api.cert);
    free(api.key);
    memset(&api, 0, sizeof api);
    api_audit_file = NULL;
    api_audit_maxsize_mb = api_audit_maxbackup = 0;
}

static size_t on_write(char *p, size_t sz, size_t n, void *ud) {
    kite_buf_append(ud, p, sz * n);
    return sz * n;
}

long api_req(const char *method, const char *path, const char *content_type, const char *body, json_object **ret) {
    return api_req_len(method, path, content_type, body, body ? strlen(body) : 0, ret);
}

long api_req_len(const char *method, const char *path, const char *content_type, const char *body, size_t len,
                 json_object **ret) {
    CURL *c = api.curl;
    curl_easy_reset(c); /* options only: the connection is kept */
    _cleanup_free_ char *url = kite_asprintf("%s%s", kite_apiserver_url(api.srv), path);
    struct kite_buf out = {0};
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Accept: application/json");
    h = curl_slist_append(h, "Expect:");
    for (const char *const *x = api_headers; x && *x; x++) h = curl_slist_append(h, *x);
    _cleanup_free_ char *ct = NULL;
    if (body) {
        ct = kite_asprintf("Content-Type: %s", content_type ? content_type : "application/json");
        h = curl_slist_append(h, ct);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CAINFO, api.ca);
    curl_easy_setopt(c, CURLOPT_SSLCERT, api.cert);
    curl_easy_setopt(c, CURLOPT_SSLKEY, api.key);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
    }
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    cr_assert_eq(rc, CURLE_OK, "%s %s: %s", method, path, curl_easy_strerror(rc));
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    if (ret) {
        enum json_tokener_error e;
        *ret = out.len ? kite_json_parse(out.p, out.len, 64, &e, NULL) : NULL;
    }
    kite_buf_release(&out);
    return code;
}

long api_reqf(const char *method, const char *path, json_object **ret, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *body;
    int n = vasprintf(&body, fmt, ap);
    va_end(ap);
    cr_assert_geq(n, 0);
    const char *ct = strcmp(method, "PATCH") == 0 ? "application/merge-patch+json" : NULL;
    long code = api_req(method, path, ct, body, ret);
    free(body);
    return code;
}

json_object *jget(json_object *o, const char *path) {
    _cleanup_free_ char *p = kite_strdup(path);
    char *save = NULL;
    for (char *k = strtok_r(p, ".", &save); o && k; k = strtok_r(NULL, ".", &save)) {
        if (json_object_is_type(o, json_type_array)) {
            char *end;
            long i = strtol(k, &end, 10);
            o = *end || i < 0 || (size_t)i >= json_object_array_length(o) ? NULL : json_object_array_get_idx(o, (size_t)i);
        } else if (json_object_is_type(o, json_type_object)) {
            json_object *n = NULL;
            o = json_object_object_get_ex(o, k, &n) ? n : NULL;
        } else {
            o = NULL;
        }
    }
    return o;
}

const char *jstr(json_object *o, const char *path) {
    json_object *v = jget(o, path);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

void api_now(char out[21]) { kite_time_format(kite_now_wall(&api.clock.clock), out); }

void api_advance_s(int64_t s) { kite_fake_clock_advance(&api.clock, s * KITE_NS_PER_SEC); }
