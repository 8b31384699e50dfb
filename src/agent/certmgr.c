/* TLS bootstrap and client certificate rotation (certmgr.h). A request is always: a new key,
 * a CSR named after the request's digest (node-csr-<sha256, base64url>, as the kubelet's
 * digestedName), created with whatever credentials the client has (the bootstrap token first,
 * the node's own certificate later), then a watch on that one CSR until it carries a
 * certificate, is denied or failed. Nothing polls: the wait is the watch, the rotation
 * deadline a cancellable timed wait. */
#include "agent/certmgr.h"
#include "base/base64.h"
#include "api/registry.h"
#include "base/backoff.h"
#include "base/clock.h"
#include "base/log.h"
#include "pki/pki.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define CSRS "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define LOG "certificates"
#define FINISHED (-EALREADY) /* a watch callback's "the CSR was decided" */

struct kite_certmgr {
    struct kite_certmgr_options o;
    char *node_name, *cert_dir;
    struct kite_client *client;
    pthread_t thread;
    struct kite_cancel cancel;
    struct kite_backoff backoff;
    atomic_uint rotations;
};

int64_t kite_certmgr_deadline(int64_t not_before_ns, int64_t not_after_ns, double u) {
    int64_t total = not_after_ns - not_before_ns;
    if (total < 0) total = 0;
    return not_before_ns + (int64_t)((double)total * 0.7) + (int64_t)((double)total * 0.2 * u);
}

static char *cert_path(const char *dir) { return kite_asprintf("%s/" KITE_CERTMGR_CERT_FILE, dir); }

/* ---- one request --------------------------------------------------------------------------- */

struct wait_ctx {
    char *cert_pem; /* the issued certificate (PEM) */
    int result;     /* -EACCES denied, -EIO failed */
    char rv[32];
};

static int on_csr_event(json_object *ev, void *ud) {
    struct wait_ctx *w = ud;
    json_object *obj = kite_obj_get(ev, "object");
    const char *type = kite_obj_str(ev, "type"), *rv = kite_meta_str(obj, "resourceVersion");
    if (kite_streq(type, "ERROR")) return -ESTALE;
    if (rv) snprintf(w->rv, sizeof w->rv, "%s", rv);
    if (!kite_streq(type, "ADDED") && !kite_streq(type, "MODIFIED")) return 0;
    json_object *status = kite_obj_get(obj, "status"), *conds = kite_obj_get(status, "conditions");
    for (size_t i = 0; conds && json_object_is_type(conds, json_type_array) && i < json_object_array_length(conds); i++) {
        const char *t = kite_obj_str(json_object_array_get_idx(conds, i), "type");
        if (kite_streq(t, "Denied") || kite_streq(t, "Failed")) {
            w->result = kite_streq(t, "Denied") ? -EACCES : -EIO;
            return FINISHED;
        }
    }
    const char *b64 = kite_obj_str(status, "certificate");
    if (b64 && *b64 && kite_base64_decode(b64, &w->cert_pem, NULL) == 0) return FINISHED;
    return 0;
}

/* Asks for a certificate for node with client's credentials and waits up to wait_ns:
 * 0 with *ret_cert and *ret_key (PEM, malloc'ed), or -errno (*ret_err says why). */
static int request_certificate(struct kite_client *client, const char *node, struct kite_clock *clock, int64_t wait_ns,
                               struct kite_cancel *cancel, char **ret_cert, char **ret_key, char **ret_err) {
    _cleanup_free_ char *cn = kite_asprintf("system:node:%s", node), *csr_pem = NULL, *key_pem = NULL;
    const char *orgs[] = {"system:nodes"};
    int r = kite_pki_new_csr(cn, orgs, 1, &csr_pem, &key_pem);
    if (r < 0) {
        *ret_err = kite_asprintf("cannot make a certificate request: %s", strerror(-r));
        return r;
    }
    unsigned char digest[32];
    gnutls_hash_fast(GNUTLS_DIG_SHA256, csr_pem, strlen(csr_pem), digest);
    _cleanup_free_ char *hash = kite_base64_encode(digest, sizeof digest, true), *req = kite_base64_encode(csr_pem, strlen(csr_pem), false);
    _cleanup_free_ char *name = kite_asprintf("node-csr-%s", hash);
    json_object *csr = json_object_new_object(), *spec = json_object_new_object(), *usages = json_object_new_array();
    kite_obj_set(csr, "apiVersion", json_object_new_string("certificates.k8s.io/v1"));
    kite_obj_set(csr, "kind", json_object_new_string("CertificateSigningRequest"));
    kite_obj_set(kite_obj_ensure(csr, "metadata"), "name", json_object_new_string(name));
    kite_obj_set(spec, "request", json_object_new_string(req));
    kite_obj_set(spec, "signerName", json_object_new_string(KITE_CERTMGR_SIGNER));
    /* an ECDSA key: no key encipherment, as the kubelet asks */
    json_object_array_add(usages, json_object_new_string("digital signature"));
    json_object_array_add(usages, json_object_new_string("client auth"));
    kite_obj_set(spec, "usages", usages);
    kite_obj_set(csr, "spec", spec);
    json_object *created = NULL;
    long code = 0;
    r = kite_client_json(client, "POST", CSRS, NULL, csr, &code, &created);
    json_object_put(csr);
    struct wait_ctx w = {0};
    if (r < 0) {
        const char *msg = kite_obj_str(created, "message");
        *ret_err = kite_asprintf("cannot create certificate signing request %s: %s", name, msg ? msg : strerror(-r));
        json_object_put(created);
        return r;
    }
    const char *rv = kite_meta_str(created, "resourceVersion");
    snprintf(w.rv, sizeof w.rv, "%s", rv ? rv : "");
    json_object_put(created);
    log_info(LOG, "certificate signing request %s created for %s; waiting for its certificate", name, cn);
    int64_t deadline = kite_now_mono(clock) + wait_ns;
    r = 0;
    while (!w.cert_pem && !w.result) {
        int64_t left_s = (deadline - kite_now_mono(clock)) / KITE_NS_PER_SEC;
        if (left_s <= 0) {
            r = -ETIMEDOUT;
            break;
        }
        _cleanup_free_ char *path = kite_asprintf(CSRS "?fieldSelector=metadata.name%%3D%s&watch=true&resourceVersion=%s&timeoutSeconds=%lld",
                                                  name, w.rv, (long long)left_s);
        int e = kite_client_watch(client, path, on_csr_event, &w, cancel);
        if (e == FINISHED || e == 0) continue;
        if (e == -ECANCELED) {
            r = e;
            break;
        }
        if (e == -ESTALE) {
            w.rv[0] = 0; /* watch from now: the CSR's current state comes as ADDED */
            continue;
        }
        /* a broken connection: wait a moment (cancellable) and watch again */
        log_warn(LOG, "watching %s: %s (will retry)", name, strerror(-e));
        kite_cancel_wait(cancel, KITE_NS_PER_SEC);
        if (kite_cancel_fired(cancel)) r = -ECANCELED;
        if (r) break;
    }
    if (!r && w.result) r = w.result;
    if (r < 0) {
        free(w.cert_pem);
        *ret_err = kite_asprintf("certificate signing request %s: %s", name,
                                 r == -EACCES ? "denied" : r == -EIO ? "failed" : r == -ETIMEDOUT ? "not issued in time" : strerror(-r));
        return r;
    }
    *ret_cert = w.cert_pem;
    *ret_key = TAKE_PTR(key_pem);
    return 0;
}

/* CERT_DIR/kubelet-client-current.pem: the certificate, then its key. */
static int write_cert(const char *dir, const char *cert, const char *key) {
    int r = kite_mkdir_p(dir, 0700);
    if (r < 0) return r;
    _cleanup_free_ char *path = cert_path(dir), *both = kite_asprintf("%s%s%s", cert, cert[strlen(cert) - 1] == '\n' ? "" : "\n", key);
    r = kite_write_file_atomic(path, both, strlen(both), 0600, false);
    explicit_bzero(both, strlen(both));
    return r;
}

/* The kubelet's kubeconfig after bootstrap: the bootstrap kubeconfig's server and CA, and the
 * certificate file for both client-certificate and client-key. */
static int write_kubeconfig(const char *path, const struct kite_kubeconfig *boot, const char *cert_file) {
    struct kite_buf b = {0};
    kite_buf_puts(&b, "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n");
    if (boot->ca_pem) {
        _cleanup_free_ char *ca = kite_base64_encode(boot->ca_pem, boot->ca_len, false);
        kite_buf_printf(&b, "    certificate-authority-data: %s\n", ca);
    } else if (boot->insecure) {
        kite_buf_puts(&b, "    insecure-skip-tls-verify: true\n");
    }
    kite_buf_printf(&b, "    server: %s\n  name: default-cluster\ncontexts:\n- context:\n    cluster: default-cluster\n"
                        "    namespace: default\n    user: default-auth\n  name: default-context\n"
                        "current-context: default-context\nusers:\n- name: default-auth\n  user:\n"
                        "    client-certificate: %s\n    client-key: %s\n",
                    boot->server, cert_file, cert_file);
    int r = kite_write_file_atomic(path, b.p, b.len, 0600, false);
    kite_buf_release(&b);
    return r;
}

/* The kubeconfig holds a certificate that is still valid (or credentials that are not a
 * certificate, which the agent uses as they are). */
static bool kubeconfig_usable(const char *path, struct kite_clock *clock) {
    struct kite_kubeconfig *kc = NULL;
    if (access(path, F_OK) < 0 || kite_kubeconfig_load(path, NULL, &kc, NULL) < 0) return false;
    bool ok = true;
    if (kc->cert_pem) {
        int64_t nb, na;
        ok = kite_pki_cert_times(kc->cert_pem, &nb, &na) == 0 && kite_sec_to_ns(na) > kite_now_wall(clock);
    }
    kite_kubeconfig_free(kc);
    return ok;
}

int kite_certmgr_bootstrap(const struct kite_certmgr_options *o, struct kite_cancel *cancel, char **ret_err) {
    struct kite_clock *clock = o->clock ? o->clock : kite_clock_real();
    if (!o->bootstrap_kubeconfig || kubeconfig_usable(o->kubeconfig, clock)) return 0;
    struct kite_kubeconfig *boot = NULL;
    int r = kite_kubeconfig_load(o->bootstrap_kubeconfig, NULL, &boot, ret_err);
    if (r < 0) return r;
    struct kite_client *client = NULL;
    struct kite_client_options co = {.user_agent = "kite-agent"};
    if ((r = kite_client_new(boot, &co, &client)) < 0) {
        *ret_err = kite_asprintf("%s: cannot use its server or credentials: %s", o->bootstrap_kubeconfig, strerror(-r));
        kite_kubeconfig_free(boot);
        return r;
    }
    log_info(LOG, "%s has no valid client certificate: bootstrapping with %s", o->kubeconfig, o->bootstrap_kubeconfig);
    _cleanup_free_ char *cert = NULL, *key = NULL;
    r = request_certificate(client, o->node_name, clock, (int64_t)KITE_CERTMGR_WAIT_S * KITE_NS_PER_SEC, cancel, &cert, &key,
                            ret_err);
    kite_client_free(client);
    _cleanup_free_ char *file = cert_path(o->cert_dir);
    if (r == 0 && (r = write_cert(o->cert_dir, cert, key)) < 0)
        *ret_err = kite_asprintf("cannot write %s: %s", file, strerror(-r));
    if (r == 0 && (r = write_kubeconfig(o->kubeconfig, boot, file)) < 0)
        *ret_err = kite_asprintf("cannot write %s: %s", o->kubeconfig, strerror(-r));
    if (key) explicit_bzero(key, strlen(key));
    kite_kubeconfig_free(boot);
    if (r == 0) log_info(LOG, "client certificate for system:node:%s written to %s", o->node_name, file);
    return r;
}

/* ---- rotation ------------------------------------------------------------------------------ */

/* When the current certificate should be renewed (wall ns); now when it cannot be read. */
static int64_t next_deadline(struct kite_certmgr *m, uint64_t *rng) {
    int64_t now = kite_now_wall(m->o.clock);
    _cleanup_free_ char *path = cert_path(m->cert_dir), *pem = NULL;
    int64_t nb, na;
    if (kite_pki_read_file(path, &pem) < 0 || kite_pki_cert_times(pem, &nb, &na) < 0) return now;
    if (m->o.rotate_after_ns > 0) {
        struct stat st;
        int64_t written = stat(path, &st) == 0 ? (int64_t)st.st_mtim.tv_sec * KITE_NS_PER_SEC + st.st_mtim.tv_nsec : now;
        return written + m->o.rotate_after_ns;
    }
    return kite_certmgr_deadline(kite_time_clamp(kite_sec_to_ns(nb)), kite_time_clamp(kite_sec_to_ns(na)), kite_rand01(rng));
}

static void *rotate(void *ud) {
    struct kite_certmgr *m = ud;
    uint64_t rng = (uint64_t)kite_now_mono(m->o.clock) | 1;
    while (!kite_cancel_fired(&m->cancel)) {
        int64_t wait = next_deadline(m, &rng) - kite_now_wall(m->o.clock);
        if (wait > 0) {
            char when[21];
            kite_time_format(kite_now_wall(m->o.clock) + wait, when);
            log_info(LOG, "client certificate rotation at %s", when);
            kite_cancel_wait(&m->cancel, wait);
            if (kite_cancel_fired(&m->cancel)) break;
        }
        _cleanup_free_ char *cert = NULL, *key = NULL, *err = NULL;
        int r = request_certificate(m->client, m->node_name, m->o.clock, (int64_t)KITE_CERTMGR_WAIT_S * KITE_NS_PER_SEC,
                                    &m->cancel, &cert, &key, &err);
        if (r == -ECANCELED) break;
        if (r == 0 && (r = write_cert(m->cert_dir, cert, key)) < 0)
            err = kite_asprintf("cannot write the certificate: %s", strerror(-r));
        if (r == 0 && (r = kite_client_set_certificate(m->client, cert, key)) < 0)
            err = kite_asprintf("cannot use the new certificate: %s", strerror(-r));
        if (key) explicit_bzero(key, strlen(key));
        if (r < 0) {
            log_warn(LOG, "client certificate rotation: %s (will retry)", err ? err : strerror(-r));
            kite_cancel_wait(&m->cancel, kite_backoff_next(&m->backoff));
            continue;
        }
        kite_backoff_reset(&m->backoff);
        atomic_fetch_add(&m->rotations, 1);
        log_info(LOG, "client certificate rotated");
    }
    return NULL;
}

int kite_certmgr_start(const struct kite_certmgr_options *o, struct kite_client *client, struct kite_certmgr **ret) {
    struct kite_certmgr *m = kite_calloc(1, sizeof *m);
    m->o = *o;
    if (!m->o.clock) m->o.clock = kite_clock_real();
    m->node_name = kite_strdup(o->node_name);
    m->cert_dir = kite_strdup(o->cert_dir);
    m->client = client;
    kite_cancel_init(&m->cancel);
    kite_backoff_init(&m->backoff, KITE_NS_PER_SEC, (int64_t)KITE_CERTMGR_RETRY_MAX_S * KITE_NS_PER_SEC, 2.0, 0.1,
                      (uint64_t)kite_now_mono(m->o.clock));
    if (pthread_create(&m->thread, NULL, rotate, m) != 0) {
        kite_cancel_release(&m->cancel);
        free(m->node_name);
        free(m->cert_dir);
        free(m);
        return -EAGAIN;
    }
    pthread_setname_np(m->thread, "certificates");
    *ret = m;
    return 0;
}

void kite_certmgr_stop(struct kite_certmgr *m) {
    if (!m) return;
    kite_cancel_fire(&m->cancel);
    pthread_join(m->thread, NULL);
    kite_cancel_release(&m->cancel);
    free(m->node_name);
    free(m->cert_dir);
    free(m);
}

unsigned kite_certmgr_rotations(struct kite_certmgr *m) { return atomic_load(&m->rotations); }
