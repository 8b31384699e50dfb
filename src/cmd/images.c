/* kite images: the node's image store (<root-dir>/images), as the runc runtime sees it. */
#include "agent/agent.h"
#include "agent/runtime/runtime.h"
#include "base/base.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"

/* the agent's default --root-dir (agent/config.c) */
#define IMAGES_DEFAULT_ROOT "/var/lib/kite-agent"

#include <stdio.h>
#include <errno.h>
#include <string.h>

static int usage(void) {
    fprintf(stderr, "usage: kite images [--root-dir DIR] import FILE.tar | list | rm NAME\n");
    return 2;
}

int cmd_images(int argc, char **argv) {
    const char *root = NULL;
    const struct flag flags[] = {
        FLAG_STR("root-dir", "DIR", "the agent's root dir", IMAGES_DEFAULT_ROOT, &root), FLAG_END};
    /* the verb and its operand come first; flags after them */
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
            printf("usage: kite images import FILE.tar | list | rm NAME [--root-dir DIR]\n");
            return 0;
        }
        return usage();
    }
    const char *verb = argv[1];
    int nargs = strcmp(verb, "list") == 0 ? 0 : 1;
    if (argc < 2 + nargs) return usage();
    const char *operand = nargs ? argv[2] : NULL;
    int r = kite_cmd_flags_parse("images", "Imports, lists and removes the node's images.", flags, argc - 1 - nargs,
                        argv + 1 + nargs, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    struct kite_runtime *rt = NULL;
    _cleanup_free_ char *err = NULL;
    struct kite_runc_options o = {.root_dir = root ? root : IMAGES_DEFAULT_ROOT};
    if ((r = kite_runtime_runc_new(&o, &rt, &err)) < 0) {
        fprintf(stderr, "kite images: %s\n", err ? err : strerror(-r));
        return 1;
    }
    int rc = 0;
    if (strcmp(verb, "import") == 0) {
        char **names = NULL;
        size_t n = 0;
        if ((r = rt->ops->import_image(rt, operand, &names, &n, &err)) < 0) {
            fprintf(stderr, "kite images import: %s\n", err ? err : strerror(-r));
            rc = 1;
        }
        for (size_t i = 0; i < n; i++) printf("imported %s\n", names[i]);
        kite_strv_free(names, n);
    } else if (strcmp(verb, "list") == 0) {
        struct kite_image *v = NULL;
        size_t n = 0;
        if ((r = rt->ops->list_images(rt, &v, &n)) < 0) {
            fprintf(stderr, "kite images list: %s\n", strerror(-r));
            rc = 1;
        }
        printf("%-50s %-20s %s\n", "NAME", "ID", "SIZE");
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < v[i].n_names; j++)
                printf("%-50s %-20.19s %lld\n", v[i].names[j], v[i].id ? v[i].id : "", (long long)v[i].size_bytes);
        kite_images_free(v, n);
    } else if (strcmp(verb, "rm") == 0) {
        if ((r = rt->ops->remove_image(rt, operand)) < 0) {
            fprintf(stderr, "kite images rm: %s: %s\n", operand,
                    r == -ENOENT ? "no such image" : r == -EBUSY ? "in use by a container" : strerror(-r));
            rc = 1;
        } else {
            printf("removed %s\n", operand);
        }
    } else {
        rc = usage();
    }
    kite_runtime_free(rt);
    return rc;
}
