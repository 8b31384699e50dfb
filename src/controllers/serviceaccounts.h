/* What every namespace holds for its pods, as kube-controller-manager's serviceaccount-controller
 * and root-ca-certificate-publisher-controller keep it: the ServiceAccount `default`, and the
 * ConfigMap `kube-root-ca.crt` whose ca.crt is the cluster's CA (what a pod verifies the API
 * server with). Each is created in every namespace that is not terminating, existing ones at
 * start included, and again when deleted; a ConfigMap whose data differs is put back. One
 * runner; namespaces, the `default` ServiceAccounts and the `kube-root-ca.crt` ConfigMaps are
 * watched (the last two by name only). A failed request is retried with the work queue's
 * back-off. */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_SACTL_SA_NAME "default"
#define KITE_SACTL_CM_NAME "kube-root-ca.crt"
#define KITE_SACTL_CM_DESCRIPTION                                                                              \
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as " \
    "the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of "  \
    "Kubernetes clusters."

struct kite_sactl_options {
    struct kite_client *client; /* borrowed */
    struct kite_clock *clock;   /* NULL = real */
    const char *root_ca_pem;    /* copied; NULL: no kube-root-ca.crt (the publisher is off) */
    bool no_serviceaccounts;    /* the serviceaccount controller is off */
};

/* The core: caches and decisions, stepped by the runner (tests step it themselves). */
struct kite_sactl;
struct kite_sactl *kite_sactl_new(const struct kite_sactl_options *o);
void kite_sactl_free(struct kite_sactl *c);
void kite_sactl_ns_upsert(struct kite_sactl *c, json_object *ns);
void kite_sactl_ns_delete(struct kite_sactl *c, json_object *ns);
void kite_sactl_sa_upsert(struct kite_sactl *c, json_object *sa);
void kite_sactl_sa_delete(struct kite_sactl *c, json_object *sa);
void kite_sactl_cm_upsert(struct kite_sactl *c, json_object *cm);
void kite_sactl_cm_delete(struct kite_sactl *c, json_object *cm);
/* Makes the requests of the namespaces due; ns until the next is due, -1 when none is queued. */
int64_t kite_sactl_step(struct kite_sactl *c);
bool kite_sactl_pending(struct kite_sactl *c);

/* The running controllers: informers and the runner. */
struct kite_serviceaccounts;
int kite_serviceaccounts_start(const struct kite_sactl_options *o, struct kite_serviceaccounts **ret);
void kite_serviceaccounts_stop(struct kite_serviceaccounts *s); /* NULL is a no-op */
