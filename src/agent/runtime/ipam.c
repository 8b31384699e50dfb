/* Pod addresses on disk (ipam.h). The directory holds one file per address in use, named by
 * the address and holding its owner; the table in memory is sorted by address and mirrors it.
 * A file is written before the address is handed out and removed before the release returns,
 * both followed by an fsync of the directory, so what a crash leaves is at worst an address
 * held by a sandbox that never ran: the runtime releases those at start. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/runtime/ipam.h"
#include "base/base.h"

struct entry {
    uint32_t addr;
    char *owner;
};

struct kite_ipam {
    char *dir;
    struct kite_cidr cidr;
    struct entry *v; /* sorted by addr */
    size_t n;
    uint32_t last; /* the last address handed out (or the gateway) */
};

void kite_ipv4_format(uint32_t addr, char *buf) {
    snprintf(buf, KITE_IPAM_ADDR_LEN, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255, addr & 255);
}

static int parse_addr(const char *s, uint32_t *ret) {
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1) return -EINVAL;
    *ret = ntohl(a.s_addr);
    return 0;
}

int kite_cidr_parse(const char *s, struct kite_cidr *ret, char **ret_error) {
    const char *slash = s ? strchr(s, '/') : NULL;
    char ip[KITE_IPAM_ADDR_LEN];
    int64_t prefix = -1;
    uint32_t addr = 0;
    if (!slash || (size_t)(slash - s) >= sizeof ip || kite_parse_int64(slash + 1, &prefix) < 0) {
        if (ret_error) *ret_error = kite_asprintf("invalid CIDR \"%s\" (want an IPv4 network such as 10.88.0.0/16)", s ? s : "");
        return -EINVAL;
    }
    memcpy(ip, s, (size_t)(slash - s));
    ip[slash - s] = 0;
    if (parse_addr(ip, &addr) < 0) {
        if (ret_error) *ret_error = kite_asprintf("invalid CIDR \"%s\": \"%s\" is not an IPv4 address", s, ip);
        return -EINVAL;
    }
    if (prefix < KITE_IPAM_PREFIX_MIN || prefix > KITE_IPAM_PREFIX_MAX) {
        if (ret_error)
            *ret_error = kite_asprintf("invalid CIDR \"%s\": the prefix length must be %d to %d", s, KITE_IPAM_PREFIX_MIN,
                                       KITE_IPAM_PREFIX_MAX);
        return -EINVAL;
    }
    uint32_t mask = ~UINT32_C(0) << (32 - prefix);
    if (addr & ~mask) {
        if (ret_error) *ret_error = kite_asprintf("invalid CIDR \"%s\": host bits are set", s);
        return -EINVAL;
    }
    *ret = (struct kite_cidr){.net = addr, .prefix = (int)prefix};
    return 0;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static bool valid_owner(const char *o) {
    size_t n = o ? strlen(o) : 0;
    if (n == 0 || n > KITE_IPAM_OWNER_MAX) return false;
    for (; *o; o++)
        if (!((*o >= '0' && *o <= '9') || (*o >= 'a' && *o <= 'z') || (*o >= 'A' && *o <= 'Z') || *o == '-' || *o == '_'))
            return false;
    return true;
}

static uint32_t broadcast_of(const struct kite_cidr *c) { return c->net | ~(~UINT32_C(0) << (32 - c->prefix)); }

static bool in_range(const struct kite_cidr *c, uint32_t a) {
    return a >= c->net + 2 && a < broadcast_of(c);
}

/* Index of addr, or of where it would go. */
static size_t find(const struct kite_ipam *m, uint32_t addr) {
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->v[mid].addr < addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void insert(struct kite_ipam *m, uint32_t addr, const char *owner) {
    size_t i = find(m, addr);
    m->v = kite_realloc(m->v, (m->n + 1) * sizeof(*m->v));
    memmove(&m->v[i + 1], &m->v[i], (m->n - i) * sizeof(*m->v));
    m->v[i] = (struct entry){.addr = addr, .owner = kite_strdup(owner)};
    m->n++;
}

static int sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int r = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return r;
}

void kite_ipam_free(struct kite_ipam *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) free(m->v[i].owner);
    free(m->v);
    free(m->dir);
    free(m);
}

int kite_ipam_open(const char *dir, const struct kite_cidr *cidr, struct kite_ipam **ret, char **ret_error) {
    int r = kite_mkdir_p(dir, 0700);
    if (r < 0) {
        if (ret_error) *ret_error = kite_asprintf("creating %s: %s", dir, strerror(-r));
        return r;
    }
    DIR *d = opendir(dir);
    if (!d) {
        r = -errno;
        if (ret_error) *ret_error = kite_asprintf("reading %s: %s", dir, strerror(-r));
        return r;
    }
    struct kite_ipam *m = kite_calloc(1, sizeof(*m));
    m->dir = kite_strdup(dir);
    m->cidr = *cidr;
    m->last = kite_cidr_gateway(cidr);
    struct dirent *e;
    while ((e = readdir(d))) {
        uint32_t addr;
        if (e->d_name[0] == '.') continue;
        _cleanup_free_ char *path = kite_asprintf("%s/%s", dir, e->d_name), *text = NULL;
        if (ends_with(e->d_name, ".tmp")) {
            unlink(path); /* a write a crash cut short: its address was never handed out */
            continue;
        }
        size_t len = 0;
        if (parse_addr(e->d_name, &addr) < 0 || kite_read_file(path, KITE_IPAM_OWNER_MAX + 2, &text, &len) < 0) continue;
        text[strcspn(text, "\n")] = 0;
        if (!valid_owner(text) || (find(m, addr) < m->n && m->v[find(m, addr)].addr == addr)) continue;
        insert(m, addr, text);
        if (in_range(cidr, addr) && addr > m->last) m->last = addr;
    }
    closedir(d);
    *ret = m;
    return 0;
}

int kite_ipam_lookup(const struct kite_ipam *m, const char *owner, uint32_t *ret_addr) {
    for (size_t i = 0; owner && i < m->n; i++)
        if (strcmp(m->v[i].owner, owner) == 0) {
            *ret_addr = m->v[i].addr;
            return 0;
        }
    return -ENOENT;
}

int kite_ipam_allocate(struct kite_ipam *m, const char *owner, uint32_t *ret_addr, char **ret_error) {
    if (!valid_owner(owner)) return -EINVAL;
    if (kite_ipam_lookup(m, owner, ret_addr) == 0) return 0;
    const struct kite_cidr *c = &m->cidr;
    uint32_t cap = kite_cidr_capacity(c), used = 0;
    for (size_t i = 0; i < m->n; i++) used += in_range(c, m->v[i].addr);
    char net[KITE_IPAM_ADDR_LEN];
    if (used >= cap) {
        kite_ipv4_format(c->net, net);
        if (ret_error)
            *ret_error = kite_asprintf("no free address in the pod CIDR %s/%d: all %u are in use", net, c->prefix, cap);
        return -ENOSPC;
    }
    /* a free address is at most `used` steps past the last one handed out */
    uint32_t a = m->last;
    for (uint32_t step = 0; step <= used; step++) {
        a = in_range(c, a + 1) ? a + 1 : c->net + 2;
        size_t i = find(m, a);
        if (i < m->n && m->v[i].addr == a) continue;
        char name[KITE_IPAM_ADDR_LEN];
        kite_ipv4_format(a, name);
        _cleanup_free_ char *path = kite_asprintf("%s/%s", m->dir, name), *text = kite_asprintf("%s\n", owner);
        int r = kite_write_file_atomic(path, text, strlen(text), 0600, false);
        if (r == 0) r = sync_dir(m->dir);
        if (r < 0) {
            unlink(path);
            if (ret_error) *ret_error = kite_asprintf("recording the address %s in %s: %s", name, m->dir, strerror(-r));
            return r;
        }
        insert(m, a, owner);
        m->last = a;
        *ret_addr = a;
        return 0;
    }
    return -ENOSPC; /* unreachable: the count above said one is free */
}

int kite_ipam_release(struct kite_ipam *m, const char *borrowed) {
    int r = 0;
    bool any = false;
    /* a copy: the caller's string may be one of the entries freed below (kite_ipam_owner) */
    _cleanup_free_ char *owner = borrowed ? kite_strdup(borrowed) : NULL;
    for (size_t i = 0; owner && i < m->n;) {
        if (strcmp(m->v[i].owner, owner) != 0) {
            i++;
            continue;
        }
        char name[KITE_IPAM_ADDR_LEN];
        kite_ipv4_format(m->v[i].addr, name);
        _cleanup_free_ char *path = kite_asprintf("%s/%s", m->dir, name);
        if (unlink(path) < 0 && errno != ENOENT) {
            r = -errno;
            i++;
            continue;
        }
        free(m->v[i].owner);
        memmove(&m->v[i], &m->v[i + 1], (m->n - i - 1) * sizeof(*m->v));
        m->n--;
        any = true;
    }
    if (any) {
        int s = sync_dir(m->dir);
        if (r == 0) r = s;
    }
    return r;
}

size_t kite_ipam_count(const struct kite_ipam *m) { return m->n; }

const char *kite_ipam_owner(const struct kite_ipam *m, size_t i) { return i < m->n ? m->v[i].owner : NULL; }
