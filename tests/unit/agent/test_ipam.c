/* Pod address management (agent/runtime/ipam.c): CIDR parsing, never handing out the network,
 * gateway or broadcast address, a full range, round-robin reuse, and what survives a restart. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/runtime/ipam.h"
#include "base/base.h"
#include "test_nodestatus_util.h"

TestSuite(ipam, .fini = nst_cleanup, .timeout = 30);

static struct kite_cidr cidr(const char *s) {
    struct kite_cidr c;
    char *err = NULL;
    cr_assert_eq(kite_cidr_parse(s, &c, &err), 0, "%s: %s", s, err ? err : "");
    return c;
}

static const char *fmt(uint32_t a) {
    static char buf[4][KITE_IPAM_ADDR_LEN];
    static int k;
    k = (k + 1) % 4;
    kite_ipv4_format(a, buf[k]);
    return buf[k];
}

static struct kite_ipam *open_at(const char *dir, const char *c) {
    struct kite_cidr cc = cidr(c);
    struct kite_ipam *m = NULL;
    char *err = NULL;
    cr_assert_eq(kite_ipam_open(dir, &cc, &m, &err), 0, "%s", err ? err : "");
    return m;
}

static const char *alloc(struct kite_ipam *m, const char *owner) {
    uint32_t a = 0;
    char *err = NULL;
    int r = kite_ipam_allocate(m, owner, &a, &err);
    cr_assert_eq(r, 0, "%s: %s", owner, err ? err : strerror(-r));
    return fmt(a);
}

Test(ipam, cidr_parse) {
    struct {
        const char *in;
        const char *net;
        int prefix;
        const char *why; /* NULL = valid */
    } cases[] = {
        {"10.88.0.0/16", "10.88.0.0", 16, NULL},
        {"10.0.0.0/8", "10.0.0.0", 8, NULL},
        {"192.168.7.4/30", "192.168.7.4", 30, NULL},
        {"10.88.0.1/16", NULL, 0, "host bits are set"},
        {"10.88.0.0/31", NULL, 0, "prefix length must be 8 to 30"},
        {"10.0.0.0/7", NULL, 0, "prefix length must be 8 to 30"},
        {"10.88.0.0/-1", NULL, 0, "prefix length"},
        {"10.88.0.0", NULL, 0, "invalid CIDR"},
        {"10.88.0.0/16x", NULL, 0, "invalid CIDR"},
        {"/16", NULL, 0, "is not an IPv4 address"},
        {"300.1.1.0/24", NULL, 0, "is not an IPv4 address"},
        {"fd00::/64", NULL, 0, "is not an IPv4 address"},
        {"", NULL, 0, "invalid CIDR"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(cases); i++) {
        struct kite_cidr c = {0};
        char *err = NULL;
        int r = kite_cidr_parse(cases[i].in, &c, &err);
        if (!cases[i].why) {
            cr_assert_eq(r, 0, "%s: %s", cases[i].in, err ? err : "");
            cr_assert_str_eq(fmt(c.net), cases[i].net);
            cr_assert_eq(c.prefix, cases[i].prefix);
        } else {
            cr_assert_eq(r, -EINVAL, "%s", cases[i].in);
            cr_assert(err && strstr(err, cases[i].why), "%s: %s", cases[i].in, err ? err : "(none)");
        }
        free(err);
    }
    struct kite_cidr c = cidr("10.88.0.0/16");
    cr_assert_str_eq(fmt(kite_cidr_gateway(&c)), "10.88.0.1");
    cr_assert_eq(kite_cidr_capacity(&c), 65533);
    c = cidr("10.0.0.0/8");
    cr_assert_eq(kite_cidr_capacity(&c), 16777213);
}

/* A /29 has eight addresses: the network (.8), the gateway (.9), five pods (.10-.14) and the
 * broadcast (.15). */
Test(ipam, full_range_is_an_error_and_a_release_makes_room) {
    _cleanup_free_ char *dir = nst_tmpdir();
    struct kite_ipam *m = open_at(dir, "10.1.2.8/29");
    const char *want[] = {"10.1.2.10", "10.1.2.11", "10.1.2.12", "10.1.2.13", "10.1.2.14"};
    for (size_t i = 0; i < 5; i++) {
        _cleanup_free_ char *owner = kite_asprintf("sb%zu", i);
        cr_assert_str_eq(alloc(m, owner), want[i]);
    }
    uint32_t a = 0;
    char *err = NULL;
    cr_assert_eq(kite_ipam_allocate(m, "sb5", &a, &err), -ENOSPC);
    cr_assert_str_eq(err, "no free address in the pod CIDR 10.1.2.8/29: all 5 are in use");
    free(err);
    /* the same owner asking again gets its own address, full or not */
    cr_assert_str_eq(alloc(m, "sb3"), "10.1.2.13");
    cr_assert_eq(kite_ipam_release(m, "sb2"), 0);
    cr_assert_eq(kite_ipam_lookup(m, "sb2", &a), -ENOENT);
    cr_assert_str_eq(alloc(m, "sb5"), "10.1.2.12");
    cr_assert_eq(kite_ipam_count(m), 5);
    kite_ipam_free(m);
}

Test(ipam, round_robin_does_not_reuse_at_once) {
    _cleanup_free_ char *dir = nst_tmpdir();
    struct kite_ipam *m = open_at(dir, "10.1.2.0/24");
    cr_assert_str_eq(alloc(m, "a"), "10.1.2.2");
    cr_assert_eq(kite_ipam_release(m, "a"), 0);
    cr_assert_str_eq(alloc(m, "b"), "10.1.2.3");
    cr_assert_eq(kite_ipam_release(m, "nobody"), 0, "releasing what an owner does not hold is no error");
    cr_assert_eq(kite_ipam_allocate(m, "../x", &(uint32_t){0}, NULL), -EINVAL);
    cr_assert_eq(kite_ipam_allocate(m, "", &(uint32_t){0}, NULL), -EINVAL);
    kite_ipam_free(m);
}

Test(ipam, wraps_around_past_the_last_address) {
    _cleanup_free_ char *dir = nst_tmpdir();
    struct kite_ipam *m = open_at(dir, "10.1.2.8/29");
    for (int i = 0; i < 5; i++) {
        _cleanup_free_ char *o = kite_asprintf("o%d", i);
        alloc(m, o);
    }
    cr_assert_eq(kite_ipam_release(m, "o0"), 0);
    cr_assert_eq(kite_ipam_release(m, "o3"), 0);
    /* the last handed out was .14: the next free is .10 (wrapped), then .13 */
    cr_assert_str_eq(alloc(m, "n1"), "10.1.2.10");
    cr_assert_str_eq(alloc(m, "n2"), "10.1.2.13");
    kite_ipam_free(m);
}

Test(ipam, state_survives_a_restart) {
    _cleanup_free_ char *dir = nst_tmpdir();
    struct kite_ipam *m = open_at(dir, "10.1.2.0/24");
    cr_assert_str_eq(alloc(m, "a"), "10.1.2.2");
    cr_assert_str_eq(alloc(m, "b"), "10.1.2.3");
    cr_assert_str_eq(alloc(m, "c"), "10.1.2.4");
    cr_assert_eq(kite_ipam_release(m, "b"), 0);
    kite_ipam_free(m);
    /* on disk: one file per address, holding its owner */
    _cleanup_free_ char *fa = kite_asprintf("%s/10.1.2.2", dir), *fb = kite_asprintf("%s/10.1.2.3", dir), *text = NULL;
    size_t len = 0;
    cr_assert_eq(kite_read_file(fa, 100, &text, &len), 0);
    cr_assert_str_eq(text, "a\n");
    cr_assert_eq(access(fb, F_OK), -1);
    /* a write a crash cut short, and files that are not addresses */
    _cleanup_free_ char *tmp = kite_asprintf("%s/10.1.2.9.tmp", dir), *junk = kite_asprintf("%s/README", dir),
                        *bad = kite_asprintf("%s/10.1.2.77", dir);
    cr_assert_eq(kite_write_file_atomic(tmp, "x\n", 2, 0600, false), 0);
    cr_assert_eq(kite_write_file_atomic(junk, "hello\n", 6, 0600, false), 0);
    cr_assert_eq(kite_write_file_atomic(bad, "not/an/owner\n", 13, 0600, false), 0);

    m = open_at(dir, "10.1.2.0/24");
    uint32_t addr;
    cr_assert_eq(kite_ipam_lookup(m, "a", &addr), 0);
    cr_assert_str_eq(fmt(addr), "10.1.2.2");
    cr_assert_eq(kite_ipam_lookup(m, "c", &addr), 0);
    cr_assert_str_eq(fmt(addr), "10.1.2.4");
    cr_assert_eq(kite_ipam_lookup(m, "b", &addr), -ENOENT);
    cr_assert_eq(kite_ipam_count(m), 2);
    cr_assert_eq(access(tmp, F_OK), -1, "a torn write is removed");
    /* allocation goes on after the highest address held: never one a running pod has */
    cr_assert_str_eq(alloc(m, "d"), "10.1.2.5");
    kite_ipam_free(m);
}

Test(ipam, addresses_outside_a_changed_cidr_stay_with_their_owners) {
    _cleanup_free_ char *dir = nst_tmpdir();
    struct kite_ipam *m = open_at(dir, "10.1.2.8/29");
    cr_assert_str_eq(alloc(m, "old"), "10.1.2.10");
    kite_ipam_free(m);
    m = open_at(dir, "10.9.0.0/30"); /* one pod address: .2 */
    uint32_t addr;
    cr_assert_eq(kite_ipam_lookup(m, "old", &addr), 0);
    cr_assert_str_eq(fmt(addr), "10.1.2.10");
    cr_assert_str_eq(alloc(m, "new"), "10.9.0.2");
    cr_assert_eq(kite_ipam_allocate(m, "more", &addr, NULL), -ENOSPC, "the old address does not count as free");
    cr_assert_eq(kite_ipam_count(m), 2);
    cr_assert_str_eq(kite_ipam_owner(m, 0), "old");
    /* released by the table's own string, as the runtime does when it reconciles */
    cr_assert_eq(kite_ipam_release(m, kite_ipam_owner(m, 0)), 0);
    cr_assert_eq(kite_ipam_count(m), 1);
    cr_assert_str_eq(kite_ipam_owner(m, 0), "new");
    kite_ipam_free(m);
}
