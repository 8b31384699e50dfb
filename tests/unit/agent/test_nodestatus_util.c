#include "test_nodestatus_util.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/base.h"

char *nst_fixture(const char *name) {
    _cleanup_free_ char *file = kite_strdup(__FILE__);
    return kite_asprintf("%s/fixtures/%s", dirname(file), name);
}

/* Temp dirs of this test process, removed by nst_cleanup even when an assertion fails. */
#define NST_MAX_TMPDIRS 16
static char *tmpdirs[NST_MAX_TMPDIRS];

char *nst_tmpdir(void) {
    char *t = kite_strdup("/tmp/kite-ns-test-XXXXXX");
    cr_assert_not_null(mkdtemp(t));
    for (size_t i = 0; i < NST_MAX_TMPDIRS; i++)
        if (!tmpdirs[i]) {
            tmpdirs[i] = kite_strdup(t);
            break;
        }
    return t;
}

void nst_cleanup(void) {
    for (size_t i = 0; i < NST_MAX_TMPDIRS; i++) {
        nst_rmtree(tmpdirs[i]);
        free(tmpdirs[i]);
        tmpdirs[i] = NULL;
    }
}

static void mkdir_p(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
}

void nst_write(const char *root, const char *path, const char *content) {
    _cleanup_free_ char *full = kite_asprintf("%s%s", root, path);
    mkdir_p(full);
    FILE *f = fopen(full, "w");
    cr_assert_not_null(f, "open %s", full);
    fputs(content, f);
    fclose(f);
}

char *nst_fixture_copy(const char *name) {
    _cleanup_free_ char *src = nst_fixture(name);
    char *dst = nst_tmpdir();
    _cleanup_free_ char *cmd = kite_asprintf("cp -a '%s/.' '%s/'", src, dst);
    cr_assert_eq(system(cmd), 0);
    return dst;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
    return remove(p);
}

void nst_rmtree(const char *root) {
    if (root && kite_startswith(root, "/tmp/kite-ns-test-"))
        nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int nst_statfs(const char *path, uint64_t *total_bytes, uint64_t *avail_bytes,
               uint64_t *total_inodes, uint64_t *free_inodes, void *ud) {
    struct nst_fake *f = ud;
    if (f->statfs_err) return f->statfs_err;
    *total_bytes = f->total_bytes;
    *avail_bytes = f->avail_bytes;
    *total_inodes = f->total_inodes;
    *free_inodes = f->free_inodes;
    return 0;
}

int nst_route_ip(char *buf, size_t len, void *ud) {
    struct nst_fake *f = ud;
    if (!f->route_ip) return -ENETUNREACH;
    snprintf(buf, len, "%s", f->route_ip);
    return 0;
}

int nst_cpus(void *ud) { return ((struct nst_fake *)ud)->cpus; }

const char *nst_get(json_object *status, const char *path) {
    _cleanup_free_ char *copy = kite_strdup(path);
    json_object *o = status;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ".", &save); tok; tok = strtok_r(NULL, ".", &save))
        if (!json_object_object_get_ex(o, tok, &o)) return NULL;
    return json_object_get_string(o);
}

json_object *nst_cond(json_object *status, const char *type) {
    json_object *arr;
    if (!json_object_object_get_ex(status, "conditions", &arr)) return NULL;
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *c = json_object_array_get_idx(arr, i), *t;
        if (json_object_object_get_ex(c, "type", &t) && strcmp(json_object_get_string(t), type) == 0)
            return c;
    }
    return NULL;
}

const char *nst_cond_field(json_object *status, const char *type, const char *field) {
    json_object *c = nst_cond(status, type), *v;
    if (!c || !json_object_object_get_ex(c, field, &v)) return NULL;
    return json_object_get_string(v);
}
