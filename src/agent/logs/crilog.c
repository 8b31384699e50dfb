/* Reading CRI-format container logs as the kubelet does (pkg/kubelet/kuberuntime/logs):
 * each raw line is `<RFC3339Nano time> <stream> <tag> <text>`; tag P marks a partial line whose
 * text continues in the next raw line (conmon splits long lines), F a full one. The output is
 * the text, lines joined; with timestamps each logical line starts with its time in
 * RFC3339Nano (UTC, trailing zeros of the fraction dropped, as Go prints it). tailLines counts
 * raw lines from the end of the file, limitBytes cuts the output at that many bytes, even
 * mid-line, and sinceSeconds drops lines older than the instant. */
#include "agent/logs/logs.h"
#include "base/gotime.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/schema.h"
#include "base/clock.h"

off_t kite_crilog_tail_offset(int fd, off_t size, int64_t n) {
    if (n < 0) return 0;
    if (n == 0) return size;
    char buf[8192];
    int64_t seen = 0;
    off_t pos = size;
    /* a last line without its '\n' yet counts as a line too */
    bool first = true;
    while (pos > 0) {
        size_t k = (size_t)KITE_MIN((off_t)sizeof buf, pos);
        pos -= (off_t)k;
        if (pread(fd, buf, k, pos) != (ssize_t)k) return 0;
        for (size_t i = k; i-- > 0;) {
            if (first) {
                first = false;
                if (buf[i] == '\n') continue; /* the end of the last line */
            }
            if (buf[i] == '\n' && ++seen >= n) return pos + (off_t)i + 1;
        }
    }
    return 0;
}

int kite_crilog_open(struct kite_crilog *l, const char *path, const struct kite_crilog_options *o) {
    memset(l, 0, sizeof *l);
    l->o = *o;
    l->left = o->limit_bytes > 0 ? o->limit_bytes : -1;
    l->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (l->fd < 0) return -errno;
    if (o->tail_lines >= 0) {
        struct stat st;
        if (fstat(l->fd, &st) < 0) {
            int r = -errno;
            kite_crilog_close(l);
            return r;
        }
        l->off = kite_crilog_tail_offset(l->fd, st.st_size, o->tail_lines);
    }
    return 0;
}

void kite_crilog_close(struct kite_crilog *l) {
    if (l->fd >= 0) close(l->fd);
    l->fd = -1;
    kite_buf_release(&l->carry);
}

static void emit(struct kite_crilog *l, struct kite_buf *out, const char *p, size_t n) {
    if (l->left >= 0 && (int64_t)n > l->left) n = (size_t)l->left;
    kite_buf_append(out, p, n);
    if (l->left >= 0) l->left -= (int64_t)n;
}

/* Go's RFC3339Nano in UTC: the fraction without trailing zeros, none when zero. */
static void format_ts(int64_t sec, int32_t nsec, char out[64]) {
    char base[32];
    kite_gotime_format(sec, 0, false, base); /* "2006-01-02T15:04:05Z" */
    base[strlen(base) - 1] = 0;
    if (!nsec) {
        snprintf(out, 64, "%sZ", base);
        return;
    }
    char frac[16];
    snprintf(frac, sizeof frac, "%09d", nsec);
    for (size_t i = 8; i > 0 && frac[i] == '0'; i--) frac[i] = 0;
    snprintf(out, 64, "%s.%sZ", base, frac);
}

void kite_crilog_render(struct kite_crilog *l, const char *line, size_t n, struct kite_buf *out) {
    /* time, stream and tag, each ended by one space; the text is the rest, possibly empty */
    const char *f[3];
    size_t fl[3], pos = 0;
    for (int i = 0; i < 3; i++) {
        size_t s = pos;
        while (pos < n && line[pos] != ' ') pos++;
        if (pos >= n && i < 2) return;
        f[i] = line + s;
        fl[i] = pos - s;
        if (pos < n) pos++;
    }
    if (fl[0] >= 48 || !fl[1] || !fl[2]) return;
    if (!(fl[1] == 6 && (memcmp(f[1], "stdout", 6) == 0 || memcmp(f[1], "stderr", 6) == 0))) return;
    char ts[48];
    memcpy(ts, f[0], fl[0]);
    ts[fl[0]] = 0;
    int64_t sec;
    int32_t nsec;
    if (kite_gotime_parse(ts, false, &sec, &nsec, NULL) < 0) return;
    /* the tag may carry more after ':' (CRI's "F:..." form); its first letter decides */
    bool partial = f[2][0] == 'P';
    if (l->o.since_ns && kite_time_add(kite_sec_to_ns(sec), nsec) < l->o.since_ns) return;
    if (l->o.timestamps && !l->mid_line) {
        char t[64];
        format_ts(sec, nsec, t);
        size_t tl = strlen(t);
        t[tl++] = ' ';
        emit(l, out, t, tl);
    }
    emit(l, out, line + pos, n - pos);
    if (!partial) emit(l, out, "\n", 1);
    l->mid_line = partial;
}

int kite_crilog_read(struct kite_crilog *l, struct kite_buf *out) {
    if (l->left == 0) return 2;
    char *buf = kite_malloc(KITE_CRILOG_READ_CHUNK);
    ssize_t n;
    do n = pread(l->fd, buf, KITE_CRILOG_READ_CHUNK, l->off);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        int r = -errno;
        free(buf);
        return r;
    }
    l->off += n;
    size_t start = 0;
    for (size_t i = 0; i < (size_t)n && l->left != 0; i++) {
        if (buf[i] != '\n') continue;
        if (l->skipping || l->carry.len + (i - start) > KITE_CRILOG_MAX_LINE) {
            l->skipping = false;
            kite_buf_reset(&l->carry);
        } else if (l->carry.len) {
            kite_buf_append(&l->carry, buf + start, i - start);
            kite_crilog_render(l, l->carry.p, l->carry.len, out);
            kite_buf_reset(&l->carry);
        } else {
            kite_crilog_render(l, buf + start, i - start, out);
        }
        start = i + 1;
    }
    if (l->left != 0 && start < (size_t)n && !l->skipping) {
        if (l->carry.len + ((size_t)n - start) > KITE_CRILOG_MAX_LINE) {
            kite_buf_reset(&l->carry);
            l->skipping = true;
        } else {
            kite_buf_append(&l->carry, buf + start, (size_t)n - start);
        }
    }
    free(buf);
    if (l->left == 0) return 2;
    return n == (ssize_t)KITE_CRILOG_READ_CHUNK ? 1 : 0;
}
