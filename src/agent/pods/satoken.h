/* The node agent's ServiceAccount tokens, as the kubelet's token manager
 * (pkg/kubelet/token): a projected volume's serviceAccountToken source gets a token from a
 * TokenRequest bound to its pod (POST serviceaccounts/NAME/token, which the Node authorizer
 * allows for the ServiceAccounts of the node's own pods), kept until 80% of its lifetime (or
 * 24 h) has passed, less a jitter of up to 10 s; then the next call asks for a new one. When
 * that request fails, a cached token that has not expired is still given (the kubelet's
 * behaviour: a blip of the API server does not empty the volume). */
#pragma once
#include "base/clock.h"
#include "client/client.h"

#define KITE_SATOKENS_REFRESH_PERCENT 80               /* of the token's lifetime */
#define KITE_SATOKENS_MAX_TTL_NS (24LL * 3600 * KITE_NS_PER_SEC) /* refreshed after this at the latest */
#define KITE_SATOKENS_JITTER_NS (10LL * KITE_NS_PER_SEC)
#define KITE_SATOKENS_DEFAULT_EXPIRATION_S 3600        /* ServiceAccountTokenProjection's default */
#define KITE_SATOKENS_CACHE_MAX 4096                    /* tokens kept; past it the oldest goes */

struct kite_satokens;
struct kite_satokens_options {
    struct kite_client *client; /* borrowed: must outlive the cache */
    struct kite_clock *clock;   /* NULL = real */
};
struct kite_satokens *kite_satokens_new(const struct kite_satokens_options *o);
void kite_satokens_free(struct kite_satokens *t); /* NULL is a no-op */

/* What a serviceAccountToken source asks for, for one pod (all borrowed). */
struct kite_satoken_req {
    const char *ns, *sa;             /* the pod's namespace and spec.serviceAccountName */
    const char *pod_name, *pod_uid;  /* the bound object */
    const char *audience;            /* NULL or "": the API server's audiences */
    int64_t expiration_s;            /* 0: KITE_SATOKENS_DEFAULT_EXPIRATION_S */
};
/* The token for r: 0 with *ret_token (malloc'ed) and *ret_refresh_at (wall ns at which a new
 * one is due; the caller syncs the volume again then); or -errno with *ret_err (malloc'ed,
 * the kubelet's "failed to fetch token: ..."). Safe from any thread; a request is made
 * outside the cache's lock. */
int kite_satokens_get(struct kite_satokens *t, const struct kite_satoken_req *r, char **ret_token,
                      int64_t *ret_refresh_at, char **ret_err);
/* What a projected volume's serviceAccountToken source (src) of pod asks for, as the kubelet's
 * projected plugin makes it: the pod's namespace and spec.serviceAccountName, bound to the pod
 * (metadata name and uid), src's audience and expirationSeconds; *ret_path is src's path, and
 * *ret_mode the volume's default_mode, or 0600 when the pod sets securityContext.fsGroup (the
 * kubelet then lets SetVolumeOwnership widen it to 0640). All borrowed from pod and src. 0, or
 * -EINVAL with *ret_err (static) when the pod or the source lacks what the request needs. */
int kite_satoken_source(json_object *pod, json_object *src, unsigned default_mode, struct kite_satoken_req *ret,
                        const char **ret_path, unsigned *ret_mode, const char **ret_err);
/* Drops the tokens bound to pod_uid (the pod left the node). */
void kite_satokens_forget_pod(struct kite_satokens *t, const char *pod_uid);
/* Tokens cached (tests, metrics). */
size_t kite_satokens_count(struct kite_satokens *t);
