/* The node agent's client certificate, as the kubelet's TLS bootstrap and client certificate
 * manager (pkg/kubelet/certificate/bootstrap, k8s.io/client-go/util/certificate): with a
 * bootstrap kubeconfig (a bootstrap token) the agent asks the API for its own certificate
 * through a CertificateSigningRequest, and later asks again with that certificate before it
 * expires, switching its client to the new one without a restart.
 *
 * Files (as the kubelet's): CERT_DIR/kubelet-client-current.pem holds the certificate and its
 * key (0600, written beside and renamed over, fsynced); the kubeconfig names that file for
 * both, so a restarted agent picks up the latest certificate. */
#pragma once
#include "client/client.h"

#define KITE_CERTMGR_CERT_FILE "kubelet-client-current.pem"
#define KITE_CERTMGR_WAIT_S (15 * 60)        /* the kubelet's certificateWaitTimeout for a bootstrap CSR */
#define KITE_CERTMGR_RETRY_MAX_S (5 * 60)    /* a failed renewal is tried again, 1 s doubling to this */
#define KITE_CERTMGR_SIGNER "kubernetes.io/kube-apiserver-client-kubelet"

struct kite_certmgr_options {
    const char *bootstrap_kubeconfig; /* NULL: no bootstrap (rotation only) */
    const char *kubeconfig;           /* written by the bootstrap; the agent's own */
    const char *cert_dir;
    const char *node_name;
    int64_t rotate_after_ns;          /* > 0: renew this long after a certificate was obtained
                                         instead of at 70-90% of its lifetime (tests) */
    struct kite_clock *clock;         /* NULL = real */
};

/* When the kubeconfig does not exist or its client certificate has expired, obtains a
 * certificate with the bootstrap kubeconfig's credentials (a CSR for CN=system:node:NAME,
 * O=system:nodes, signer kube-apiserver-client-kubelet, waiting for it with a watch) and
 * writes the certificate file and the kubeconfig (0600). 0 also when nothing had to be done;
 * -errno with *ret_err (malloc'ed): -EACCES the CSR was denied, -ETIMEDOUT not issued within
 * KITE_CERTMGR_WAIT_S, -ECANCELED cancel fired. */
int kite_certmgr_bootstrap(const struct kite_certmgr_options *o, struct kite_cancel *cancel, char **ret_err);

/* The rotation thread: sleeps until the rotation deadline of the certificate in cert_dir (a
 * jittered 70-90% of its lifetime, the kubelet's), asks for a new certificate with client's
 * current credentials, writes it and gives it to client (kite_client_set_certificate). client
 * is borrowed and must outlive the manager. */
struct kite_certmgr;
int kite_certmgr_start(const struct kite_certmgr_options *o, struct kite_client *client, struct kite_certmgr **ret);
/* Stops and joins; NULL is a no-op. */
void kite_certmgr_stop(struct kite_certmgr *m);
/* Certificates obtained by rotation so far. */
unsigned kite_certmgr_rotations(struct kite_certmgr *m);

/* The rotation deadline of a certificate valid [not_before, not_after] (unix ns): not_before
 * plus 70% of its lifetime plus u (in [0,1)) times 20% of it. */
int64_t kite_certmgr_deadline(int64_t not_before_ns, int64_t not_after_ns, double u);
