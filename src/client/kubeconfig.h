/* kubeconfig files (clientcmd v1): the current context's cluster and user, with file
 * references read and *-data fields base64-decoded, so the REST client needs no paths. */
#pragma once
#include <json-c/json.h>
#include "base/base.h"

/* Longest PEM or token accepted from a kubeconfig (a certificate chain is a few KiB). */
#define KITE_KUBECONFIG_MAX_BLOB (1u << 20)

struct kite_kubeconfig {
    char *server;          /* "https://127.0.0.1:6443", no trailing slash */
    char *ca_pem;          /* NULL = system trust store */
    size_t ca_len;
    bool insecure;         /* insecure-skip-tls-verify */
    char *cert_pem, *key_pem; /* client certificate and key; NULL = none */
    size_t cert_len, key_len;
    char *token;           /* bearer token (token or tokenFile); NULL = none */
    char *context;         /* the context used */
};

/* Interprets a parsed kubeconfig tree (borrowed). context NULL = current-context. base_dir
 * resolves relative file paths (the kubeconfig's directory, as kubectl does); NULL = cwd.
 * *ret is set only on success (caller kite_kubeconfig_free()s). On error -EINVAL/-ENOENT/...
 * and *ret_err (may be NULL) gets a malloc'ed message naming the field. */
int kite_kubeconfig_from_json(json_object *root, const char *context, const char *base_dir,
                              struct kite_kubeconfig **ret, char **ret_err);
/* Reads and interprets a kubeconfig file. */
int kite_kubeconfig_load(const char *path, const char *context, struct kite_kubeconfig **ret,
                         char **ret_err);
/* kubectl's loading rules: path when given; else the files of $KUBECONFIG (':'-separated; missing
 * ones skipped) merged as kubectl merges them (the first file to name a context, cluster or user,
 * or to set current-context, wins; relative file references resolve against the file that holds
 * them); else ~/.kube/config. */
int kite_kubeconfig_load_default(const char *path, const char *context, struct kite_kubeconfig **ret,
                                 char **ret_err);
/* Adds the cluster and user of kubeconfig `from`'s current context to the user's kubeconfig (the
 * first file of $KUBECONFIG, else ~/.kube/config) as the cluster, user and context `name`, and
 * makes it the current context, as kind and k3d do. Entries of other names are kept as they are;
 * the file is written 0600 under kubectl's lock (FILE.lock). *ret_file (may be NULL) names the file. */
int kite_kubeconfig_merge_cluster(const char *from, const char *name, char **ret_file, char **ret_err);
/* Removes what kite_kubeconfig_merge_cluster added, if the cluster `name` there still has this
 * server (another may have taken the name since); a current-context of `name` is unset. */
int kite_kubeconfig_unmerge_cluster(const char *name, const char *server, char **ret_err);
/* Accepts NULL. Wipes key material before freeing. */
void kite_kubeconfig_free(struct kite_kubeconfig *k);

