/* kite store copy: every object of one store into another (SQLite <-> etcd), with the cluster
 * stopped. */
#include "apiserver/apiserver.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "store/store.h"

#include <stdio.h>

static int open_store(const char *what, const char *url, const struct kite_store_options *o, struct kite_store **ret) {
    _cleanup_free_ char *err = NULL;
    int r = kite_store_open(url, o, ret, &err);
    if (r < 0) fprintf(stderr, "kite store copy: %s %s: %s\n", what, url, err ? err : strerror(-r));
    return r;
}

int cmd_store(int argc, char **argv) {
    const char *from = NULL, *to = NULL, *prefix = "/registry", *ca = NULL, *cert = NULL, *key = NULL;
    const struct flag flags[] = {
        FLAG_STR("from", "URL", "the store to copy from: sqlite:PATH or etcd:http[s]://HOST:PORT,...", NULL, &from,
                 .required = true),
        FLAG_STR("to", "URL", "the store to copy into (it must hold no object yet)", NULL, &to, .required = true),
        FLAG_STR("etcd-prefix", "PREFIX", "the prefix of every key in etcd", "/registry", &prefix),
        FLAG_STR("etcd-cafile", "FILE", "CA certificates (PEM) that sign the etcd members'", NULL, &ca),
        FLAG_STR("etcd-certfile", "FILE", "client certificate (PEM) for etcd", NULL, &cert),
        FLAG_STR("etcd-keyfile", "FILE", "client key (PEM) for etcd", NULL, &key),
        FLAG_END,
    };
    const char *verb = argc > 1 ? argv[1] : NULL;
    if (!verb || strcmp(verb, "copy") != 0) {
        if (verb && (strcmp(verb, "-h") == 0 || strcmp(verb, "--help") == 0)) {
            printf("usage: kite store copy --from URL --to URL [flags]\n");
            return 0;
        }
        fprintf(stderr, "kite store: copy (kite store copy --from sqlite:DATA/kite.db --to etcd:http://HOST:2379)\n");
        return 2;
    }
    int r = kite_cmd_flags_parse("store copy",
                        "Copies every object from one store into another, with every apiserver of the cluster stopped.\n"
                        "Values are copied as stored (sealed ones stay sealed), but for kube-apiserver's k8s\\0\n"
                        "protobuf ones, copied as JSON; resourceVersions become the destination's revisions.",
                        flags, argc - 1, argv + 1, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    /* etcd://HOST:PORT is etcd's plain http */
    /* envelopes read as JSON, so that a SQLite destination can serve them; written as given */
    struct kite_apiserver_codec *codec = kite_apiserver_codec_new(false);
    struct kite_store_options o = {.etcd_cafile = ca, .etcd_certfile = cert, .etcd_keyfile = key, .etcd_prefix = prefix,
                                   .codec = kite_apiserver_codec_store(codec)};
    struct kite_store *src = NULL, *dst = NULL;
    if (open_store("--from", from, &o, &src) < 0) {
        kite_apiserver_codec_free(codec);
        return 1;
    }
    if (open_store("--to", to, &o, &dst) < 0) {
        kite_store_close(src);
        kite_apiserver_codec_free(codec);
        return 1;
    }
    struct kite_record **recs = NULL, **have = NULL;
    size_t n = 0, nh = 0, copied = 0;
    int64_t first = 0, last = 0;
    r = kite_store_range(dst, "/registry/", 0, NULL, 1, &have, &nh, NULL);
    if (r == 0 && nh) {
        fprintf(stderr, "kite store copy: %s holds objects already (%s): copy into an empty store\n", to, have[0]->key);
        r = -EEXIST;
    } else if (r < 0) {
        fprintf(stderr, "kite store copy: cannot read %s: %s\n", to, strerror(-r));
    }
    for (size_t i = 0; i < nh; i++) kite_record_unref(have[i]);
    free(have);
    if (r == 0 && (r = kite_store_range(src, "/registry/", 0, NULL, 0, &recs, &n, NULL)) < 0)
        fprintf(stderr, "kite store copy: cannot read %s: %s\n", from, strerror(-r));
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct kite_write w = {.type = KITE_WRITE_CREATE, .key = recs[i]->key, .value = recs[i]->value,
                               .len = recs[i]->len};
        int64_t rev = 0;
        if ((r = kite_store_write(dst, &w, &rev, NULL)) < 0) {
            fprintf(stderr, "kite store copy: %s into %s: %s (%zu of %zu copied)\n", recs[i]->key, to, strerror(-r),
                    copied, n);
            break;
        }
        if (!first) first = rev;
        last = rev;
        copied++;
    }
    for (size_t i = 0; i < n; i++) kite_record_unref(recs[i]);
    free(recs);
    kite_store_close(dst);
    kite_store_close(src);
    kite_apiserver_codec_free(codec);
    if (r < 0) return 1;
    printf("copied %zu objects from %s to %s\n", copied, from, to);
    if (copied)
        printf("resourceVersions changed: the objects are at revisions %lld..%lld of %s now; clients list again\n",
               (long long)first, (long long)last, to);
    return 0;
}
