/* The kubelet's atomic writer (atomicwriter.c): the ..data layout, exact modes, a payload that
 * did not change writes nothing, a change swaps ..data and removes what went, bad paths are
 * refused; and the downward API's map format. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/pods/pods-int.h"
#include "base/base.h"

#define NOW (1796541600LL * KITE_NS_PER_SEC + 123456789) /* 2026-12-06T07:20:00.123456789Z */

static char dir[64];

static void setup(void) {
    snprintf(dir, sizeof dir, "/tmp/kite-aw-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    umask(077); /* the modes asked for are written whatever the umask */
}

static void teardown(void) {
    kite_rm_rf(dir);
    umask(022);
}

TestSuite(atomic_writer, .init = setup, .fini = teardown);

static char *link_of(const char *name) {
    _cleanup_free_ char *p = kite_asprintf("%s/%s", dir, name);
    char buf[512];
    ssize_t n = readlink(p, buf, sizeof buf - 1);
    if (n < 0) return NULL;
    buf[n] = 0;
    return kite_strdup(buf);
}

static char *read_at(const char *rel, mode_t *mode) {
    _cleanup_free_ char *p = kite_asprintf("%s/%s", dir, rel);
    struct stat st;
    if (stat(p, &st) < 0) return NULL;
    if (mode) *mode = st.st_mode & 07777;
    FILE *f = fopen(p, "r");
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return kite_strdup(buf);
}

static size_t entries(void) {
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static int write_payload(struct pods_payload *pl, int64_t now) {
    char *err = NULL;
    int r = kite_pods_atomic_write(dir, pl, now, &err);
    cr_assert_geq(r, 0, "%s", err ? err : "");
    free(err);
    return r;
}

Test(atomic_writer, first_write_lays_out_data_and_symlinks) {
    struct pods_payload pl = {0};
    kite_pods_payload_add(&pl, "a", "alpha", 5, 0600);
    kite_pods_payload_add(&pl, "dir/b.txt", "beta\n", 5, 0444);
    kite_pods_payload_add(&pl, "dir/sub/c", "", 0, 0755);
    cr_assert_eq(pl.bytes, 10);
    cr_assert_eq(write_payload(&pl, NOW), 1);

    _cleanup_free_ char *data = link_of("..data");
    cr_assert_str_eq(data, "..2026_12_06_07_20_00.123456789");
    _cleanup_free_ char *la = link_of("a"), *ld = link_of("dir");
    cr_assert_str_eq(la, "..data/a");
    cr_assert_str_eq(ld, "..data/dir");
    mode_t m = 0;
    _cleanup_free_ char *a = read_at("a", &m);
    cr_assert_str_eq(a, "alpha");
    cr_assert_eq(m, 0600, "%o", m);
    _cleanup_free_ char *b = read_at("dir/b.txt", &m);
    cr_assert_str_eq(b, "beta\n");
    cr_assert_eq(m, 0444, "%o", m);
    _cleanup_free_ char *c = read_at("dir/sub/c", &m);
    cr_assert_str_eq(c, "");
    cr_assert_eq(m, 0755, "%o", m);
    /* ..data, the timestamped directory, a and dir: no ..data_tmp left behind */
    cr_assert_eq(entries(), 4);
    kite_pods_payload_release(&pl);
}

Test(atomic_writer, same_payload_writes_nothing) {
    struct pods_payload pl = {0};
    kite_pods_payload_add(&pl, "a", "alpha", 5, 0644);
    kite_pods_payload_add(&pl, "d/b", "beta", 4, 0644);
    cr_assert_eq(write_payload(&pl, NOW), 1);
    _cleanup_free_ char *before = link_of("..data");
    cr_assert_eq(write_payload(&pl, NOW + KITE_NS_PER_SEC), 0);
    _cleanup_free_ char *after = link_of("..data");
    cr_assert_str_eq(before, after);
    /* a mode alone is a change */
    pl.f[0].mode = 0640;
    cr_assert_eq(write_payload(&pl, NOW + 2 * KITE_NS_PER_SEC), 1);
    _cleanup_free_ char *moded = link_of("..data");
    cr_assert_str_neq(moded, after);
    /* and so is a user-visible entry that went */
    _cleanup_free_ char *vis = kite_asprintf("%s/a", dir);
    cr_assert_eq(unlink(vis), 0);
    cr_assert_eq(write_payload(&pl, NOW + 3 * KITE_NS_PER_SEC), 1);
    _cleanup_free_ char *a = read_at("a", NULL);
    cr_assert_str_eq(a, "alpha");
    kite_pods_payload_release(&pl);
}

Test(atomic_writer, change_swaps_data_and_removes_what_went) {
    struct pods_payload pl = {0};
    kite_pods_payload_add(&pl, "keep", "1", 1, 0644);
    kite_pods_payload_add(&pl, "gone", "2", 1, 0644);
    kite_pods_payload_add(&pl, "d/x", "3", 1, 0644);
    cr_assert_eq(write_payload(&pl, NOW), 1);
    _cleanup_free_ char *old = link_of("..data");
    /* a reader holding the old file keeps reading the old contents */
    _cleanup_free_ char *keep_path = kite_asprintf("%s/keep", dir);
    int fd = open(keep_path, O_RDONLY);
    cr_assert_geq(fd, 0);
    /* a directory the kubelet made for a subPath is not the writer's */
    _cleanup_free_ char *own = kite_asprintf("%s/made-for-subpath", dir);
    cr_assert_eq(mkdir(own, 0755), 0);
    kite_pods_payload_release(&pl);

    kite_pods_payload_add(&pl, "keep", "one", 3, 0644);
    kite_pods_payload_add(&pl, "new", "4", 1, 0644);
    cr_assert_eq(write_payload(&pl, NOW + KITE_NS_PER_SEC), 1);
    _cleanup_free_ char *cur = link_of("..data");
    cr_assert_str_eq(cur, "..2026_12_06_07_20_01.123456789");
    _cleanup_free_ char *old_path = kite_asprintf("%s/%s", dir, old);
    cr_assert_neq(access(old_path, F_OK), 0, "the old timestamped directory is removed");
    _cleanup_free_ char *keep = read_at("keep", NULL), *nw = read_at("new", NULL);
    cr_assert_str_eq(keep, "one");
    cr_assert_str_eq(nw, "4");
    _cleanup_free_ char *gone = link_of("gone"), *d = link_of("d");
    cr_assert_null(gone);
    cr_assert_null(d);
    cr_assert_eq(access(own, F_OK), 0);
    char buf[8] = {0};
    cr_assert_eq(read(fd, buf, sizeof buf - 1), 1);
    cr_assert_str_eq(buf, "1");
    close(fd);
    /* ..data, its directory, keep, new, made-for-subpath */
    cr_assert_eq(entries(), 5);
    kite_pods_payload_release(&pl);
}

Test(atomic_writer, empty_payload_is_an_empty_data_dir) {
    struct pods_payload pl = {0};
    cr_assert_eq(write_payload(&pl, NOW), 1);
    _cleanup_free_ char *data = link_of("..data");
    cr_assert_not_null(data);
    cr_assert_eq(entries(), 2);
    cr_assert_eq(write_payload(&pl, NOW + 1), 0);
}

Test(atomic_writer, same_second_gets_another_directory) {
    struct pods_payload pl = {0};
    kite_pods_payload_add(&pl, "a", "1", 1, 0644);
    cr_assert_eq(write_payload(&pl, NOW), 1);
    _cleanup_free_ char *first = link_of("..data");
    pl.f[0].data[0] = '2';
    _cleanup_free_ char *ts = kite_asprintf("%s/%s", dir, first);
    cr_assert_eq(write_payload(&pl, NOW), 1); /* the same clock reading */
    _cleanup_free_ char *second = link_of("..data");
    cr_assert_str_neq(first, second);
    _cleanup_free_ char *a = read_at("a", NULL);
    cr_assert_str_eq(a, "2");
    kite_pods_payload_release(&pl);
}

Test(atomic_writer, bad_paths_are_refused) {
    static const char *const bad[][2] = {
        {"", "invalid path: must not be empty"},
        {"/etc/passwd", "invalid path: must be relative path: /etc/passwd"},
        {"../x", "invalid path: must not contain '..': ../x"},
        {"a/../../x", "invalid path: must not contain '..': a/../../x"},
        {"..data", "invalid path: must not start with '..': ..data"},
        {"./..x", "invalid path: must not start with '..': ./..x"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *err = NULL;
        char *c = kite_pods_payload_path_clean(bad[i][0], &err);
        cr_assert_null(c, "%s", bad[i][0]);
        cr_assert_str_eq(err, bad[i][1]);
        free(err);
    }
    static const char *const ok[][2] = {{"a//b/.", "a/b"}, {"./a", "a"}, {"a.b/..c", "a.b/..c"}, {"x..", "x.."}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        char *err = NULL;
        _cleanup_free_ char *c = kite_pods_payload_path_clean(ok[i][0], &err);
        cr_assert_str_eq(c, ok[i][1]);
    }
    /* the writer checks its payload too: nothing is written */
    struct pods_payload pl = {0};
    kite_pods_payload_add(&pl, "../escape", "x", 1, 0644);
    char *err = NULL;
    cr_assert_eq(kite_pods_atomic_write(dir, &pl, NOW, &err), -EINVAL);
    cr_assert_str_eq(err, "invalid path: must not contain '..': ../escape");
    free(err);
    kite_pods_payload_release(&pl);
    kite_pods_payload_add(&pl, "a", "x", 1, 0644);
    kite_pods_payload_add(&pl, "a/b", "y", 1, 0644);
    cr_assert_eq(kite_pods_atomic_write(dir, &pl, NOW, &err), -EINVAL);
    cr_assert_str_eq(err, "invalid payload: a is both a file and a directory");
    free(err);
    kite_pods_payload_release(&pl);
    cr_assert_eq(entries(), 0);
}

Test(atomic_writer, later_file_of_a_path_wins) {
    struct pods_payload pl = {0};
    kite_pods_payload_add(&pl, "a", "first", 5, 0644);
    kite_pods_payload_add(&pl, "a", "2nd", 3, 0600);
    cr_assert_eq(pl.n, 1);
    cr_assert_eq(pl.bytes, 3);
    cr_assert_str_eq(pl.f[0].data, "2nd");
    cr_assert_eq(pl.f[0].mode, 0600);
    kite_pods_payload_release(&pl);
}

Test(downward_api, labels_file_as_format_map) {
    json_object *m = json_tokener_parse("{\"tier\":\"back\",\"app\":\"web\",\"q\":\"say \\\"hi\\\"\\n\\\\\","
                                        "\"u\":\"caf\\u00e9\\u0001\"}");
    _cleanup_free_ char *s = kite_pods_format_map(m);
    cr_assert_str_eq(s, "app=\"web\"\nq=\"say \\\"hi\\\"\\n\\\\\"\ntier=\"back\"\nu=\"caf\xc3\xa9\\x01\"");
    json_object_put(m);
    _cleanup_free_ char *e = kite_pods_format_map(NULL);
    cr_assert_str_eq(e, "");
}

Test(atomic_writer, fs_group_owns_files_and_dirs) {
    if (geteuid() != 0) cr_skip_test("giving a file another group needs root");
    struct pods_payload pl = {.has_gid = true, .gid = 4321};
    kite_pods_payload_add(&pl, "d/f", "x", 1, 0440);
    cr_assert_eq(write_payload(&pl, NOW), 1);
    _cleanup_free_ char *f = kite_asprintf("%s/d/f", dir), *d = kite_asprintf("%s/..data/d", dir),
                        *data = kite_asprintf("%s/..data/", dir);
    struct stat st;
    cr_assert_eq(stat(f, &st), 0);
    cr_assert_eq(st.st_gid, 4321);
    cr_assert_eq(st.st_mode & 07777, 0440, "%o", st.st_mode & 07777);
    cr_assert_eq(stat(d, &st), 0);
    cr_assert_eq(st.st_gid, 4321);
    cr_assert_eq(st.st_mode & 07777, 02755, "%o", st.st_mode & 07777);
    cr_assert_eq(stat(data, &st), 0);
    cr_assert_eq(st.st_gid, 4321);
    /* written with its group: the same payload again writes nothing; another group rewrites */
    cr_assert_eq(write_payload(&pl, NOW + 1), 0);
    pl.gid = 4322;
    cr_assert_eq(write_payload(&pl, NOW + 2), 1);
    cr_assert_eq(stat(f, &st), 0);
    cr_assert_eq(st.st_gid, 4322);
    kite_pods_payload_release(&pl);
}
