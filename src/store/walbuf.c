/* A SQLite VFS over the default one that gathers the writes to a WAL file between two syncs
 * into one write.
 *
 * SQLite appends a committing transaction's frames to the WAL with two writes per page (the
 * 24-byte frame header, then the page), and then syncs: with a batch of ~50 writes that is
 * ~14 write system calls per commit on the writer thread, each with its own locking and
 * bookkeeping in the file system. Here consecutive writes are held in a buffer and written at
 * once when the run breaks, when the buffer is full, and before anything that must see the file
 * as SQLite wrote it: a sync (so durability is unchanged: every byte SQLite wrote is written
 * before the sync SQLite asked for), a read, a size query or change, a file control, a lock
 * change, and close. Other files (the database, its shared-memory index) pass straight through.
 * A failed deferred write is reported by the call that flushed it (for a commit: its sync), so
 * SQLite fails that transaction as it would have failed the write; once reported it is not
 * reported again (SQLite rolls that transaction back, and the next one must not fail for it). */
#include "store/store-int.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* At most this much in one write: SQLite's unix VFS writes at most 128 KiB per call (it masks
 * the length with 0x1ffff) and reports a shorter write as a full disk. */
#define WALBUF_CAP (96 * 1024)

struct wfile {
    sqlite3_file base;
    sqlite3_file *real; /* follows this struct in the same allocation */
    bool wal;
    char *buf;
    size_t len;
    int err; /* a failed deferred write not reported yet: the next sync fails with it */
    sqlite3_int64 off; /* file offset of buf[0] */
};

static sqlite3_vfs walbuf_vfs;
static sqlite3_vfs *real_vfs;
static pthread_once_t walbuf_once = PTHREAD_ONCE_INIT;
static int walbuf_rc = SQLITE_ERROR;

/* Writes what is held. A failure is kept in f->err for a call that cannot report it (the shm
 * barrier); callers that return it use flush_report. */
static int flush(struct wfile *f) {
    if (!f->len) return SQLITE_OK;
    int rc = f->real->pMethods->xWrite(f->real, f->buf, (int)f->len, f->off);
    f->len = 0;
    if (rc != SQLITE_OK && !f->err) f->err = rc;
    return rc;
}

/* Flushes and returns the first failure not reported yet (then it counts as reported). */
static int flush_report(struct wfile *f) {
    flush(f);
    int rc = f->err;
    f->err = SQLITE_OK;
    return rc;
}

static int w_close(sqlite3_file *pf) {
    struct wfile *f = (struct wfile *)pf;
    int rc = flush_report(f);
    int rc2 = f->real->pMethods->xClose(f->real);
    free(f->buf);
    f->buf = NULL;
    return rc != SQLITE_OK ? rc : rc2;
}

static int w_read(sqlite3_file *pf, void *p, int amt, sqlite3_int64 off) {
    struct wfile *f = (struct wfile *)pf;
    int rc = flush_report(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, p, amt, off);
}

static int w_write(sqlite3_file *pf, const void *p, int amt, sqlite3_int64 off) {
    struct wfile *f = (struct wfile *)pf;
    if (!f->wal || amt <= 0) return f->real->pMethods->xWrite(f->real, p, amt, off);
    if (f->len && (off != f->off + (sqlite3_int64)f->len || f->len + (size_t)amt > WALBUF_CAP)) {
        int rc = flush_report(f);
        if (rc != SQLITE_OK) return rc;
    }
    if ((size_t)amt > WALBUF_CAP) return f->real->pMethods->xWrite(f->real, p, amt, off);
    if (!f->buf && !(f->buf = malloc(WALBUF_CAP))) return f->real->pMethods->xWrite(f->real, p, amt, off);
    if (!f->len) f->off = off;
    memcpy(f->buf + f->len, p, (size_t)amt);
    f->len += (size_t)amt;
    return SQLITE_OK;
}

/* Calls that must see the file as written: flush, then pass through. */
#define FLUSH_OR_RETURN(f)                   \
    do {                                     \
        int rc_ = flush_report(f);           \
        if (rc_ != SQLITE_OK) return rc_;    \
    } while (0)

static int w_truncate(sqlite3_file *pf, sqlite3_int64 size) {
    struct wfile *f = (struct wfile *)pf;
    FLUSH_OR_RETURN(f);
    return f->real->pMethods->xTruncate(f->real, size);
}

static int w_sync(sqlite3_file *pf, int flags) {
    struct wfile *f = (struct wfile *)pf;
    int rc = flush_report(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int w_file_size(sqlite3_file *pf, sqlite3_int64 *size) {
    struct wfile *f = (struct wfile *)pf;
    FLUSH_OR_RETURN(f);
    return f->real->pMethods->xFileSize(f->real, size);
}

static int w_lock(sqlite3_file *pf, int lock) {
    struct wfile *f = (struct wfile *)pf;
    FLUSH_OR_RETURN(f);
    return f->real->pMethods->xLock(f->real, lock);
}

static int w_unlock(sqlite3_file *pf, int lock) {
    struct wfile *f = (struct wfile *)pf;
    FLUSH_OR_RETURN(f);
    return f->real->pMethods->xUnlock(f->real, lock);
}

static int w_check_reserved(sqlite3_file *pf, int *out) {
    struct wfile *f = (struct wfile *)pf;
    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int w_file_control(sqlite3_file *pf, int op, void *arg) {
    struct wfile *f = (struct wfile *)pf;
    FLUSH_OR_RETURN(f);
    return f->real->pMethods->xFileControl(f->real, op, arg);
}

static int w_sector_size(sqlite3_file *pf) {
    struct wfile *f = (struct wfile *)pf;
    return f->real->pMethods->xSectorSize(f->real);
}

static int w_device_chars(sqlite3_file *pf) {
    struct wfile *f = (struct wfile *)pf;
    return f->real->pMethods->xDeviceCharacteristics(f->real);
}

static int w_shm_map(sqlite3_file *pf, int pg, int pgsz, int extend, void volatile **pp) {
    struct wfile *f = (struct wfile *)pf;
    return f->real->pMethods->xShmMap(f->real, pg, pgsz, extend, pp);
}

static int w_shm_lock(sqlite3_file *pf, int offset, int n, int flags) {
    struct wfile *f = (struct wfile *)pf;
    return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

/* SQLite publishes new frames to readers by rewriting the WAL index header around a barrier.
 * With synchronous=FULL (the store's setting) the commit's sync has flushed them already; the
 * flush here keeps that true under any setting (a failure is reported by the next sync). */
static void w_shm_barrier(sqlite3_file *pf) {
    struct wfile *f = (struct wfile *)pf;
    flush(f);
    f->real->pMethods->xShmBarrier(f->real);
}

static int w_shm_unmap(sqlite3_file *pf, int del) {
    struct wfile *f = (struct wfile *)pf;
    return f->real->pMethods->xShmUnmap(f->real, del);
}

static int w_fetch(sqlite3_file *pf, sqlite3_int64 off, int amt, void **pp) {
    struct wfile *f = (struct wfile *)pf;
    FLUSH_OR_RETURN(f);
    return f->real->pMethods->xFetch(f->real, off, amt, pp);
}

static int w_unfetch(sqlite3_file *pf, sqlite3_int64 off, void *p) {
    struct wfile *f = (struct wfile *)pf;
    return f->real->pMethods->xUnfetch(f->real, off, p);
}

static const sqlite3_io_methods walbuf_methods = {
    .iVersion = 3,
    .xClose = w_close,
    .xRead = w_read,
    .xWrite = w_write,
    .xTruncate = w_truncate,
    .xSync = w_sync,
    .xFileSize = w_file_size,
    .xLock = w_lock,
    .xUnlock = w_unlock,
    .xCheckReservedLock = w_check_reserved,
    .xFileControl = w_file_control,
    .xSectorSize = w_sector_size,
    .xDeviceCharacteristics = w_device_chars,
    .xShmMap = w_shm_map,
    .xShmLock = w_shm_lock,
    .xShmBarrier = w_shm_barrier,
    .xShmUnmap = w_shm_unmap,
    .xFetch = w_fetch,
    .xUnfetch = w_unfetch,
};

static int w_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *pf, int flags, int *out_flags) {
    struct wfile *f = (struct wfile *)pf;
    memset(f, 0, sizeof(*f));
    f->real = (sqlite3_file *)(f + 1);
    int rc = real_vfs->xOpen(real_vfs, name, f->real, flags, out_flags);
    if (rc != SQLITE_OK) {
        /* SQLite calls xClose only when pMethods is set, as on a failed open of the real VFS */
        if (f->real->pMethods) f->real->pMethods->xClose(f->real);
        f->base.pMethods = NULL;
        return rc;
    }
    if (!f->real->pMethods) {
        f->base.pMethods = NULL;
        return rc;
    }
    f->wal = (flags & SQLITE_OPEN_WAL) != 0 && f->real->pMethods->iVersion >= 3;
    f->base.pMethods = &walbuf_methods;
    return SQLITE_OK;
}

/* Everything but opening files is the real VFS's. */
static int w_delete(sqlite3_vfs *v, const char *name, int sync) { return real_vfs->xDelete(real_vfs, name, sync); }
static int w_access(sqlite3_vfs *v, const char *name, int flags, int *out) {
    return real_vfs->xAccess(real_vfs, name, flags, out);
}
static int w_full_pathname(sqlite3_vfs *v, const char *name, int n, char *out) {
    return real_vfs->xFullPathname(real_vfs, name, n, out);
}
static void *w_dl_open(sqlite3_vfs *v, const char *name) { return real_vfs->xDlOpen(real_vfs, name); }
static void w_dl_error(sqlite3_vfs *v, int n, char *msg) { real_vfs->xDlError(real_vfs, n, msg); }
static void (*w_dl_sym(sqlite3_vfs *v, void *h, const char *sym))(void) { return real_vfs->xDlSym(real_vfs, h, sym); }
static void w_dl_close(sqlite3_vfs *v, void *h) { real_vfs->xDlClose(real_vfs, h); }
static int w_randomness(sqlite3_vfs *v, int n, char *out) { return real_vfs->xRandomness(real_vfs, n, out); }
static int w_sleep(sqlite3_vfs *v, int us) { return real_vfs->xSleep(real_vfs, us); }
static int w_current_time(sqlite3_vfs *v, double *out) { return real_vfs->xCurrentTime(real_vfs, out); }
static int w_get_last_error(sqlite3_vfs *v, int n, char *out) {
    return real_vfs->xGetLastError ? real_vfs->xGetLastError(real_vfs, n, out) : 0;
}
static int w_current_time_int64(sqlite3_vfs *v, sqlite3_int64 *out) {
    return real_vfs->xCurrentTimeInt64(real_vfs, out);
}

static void walbuf_init(void) {
    real_vfs = sqlite3_vfs_find(NULL);
    if (!real_vfs || real_vfs->iVersion < 2) return;
    walbuf_vfs = (sqlite3_vfs){
        .iVersion = 2,
        .szOsFile = (int)sizeof(struct wfile) + real_vfs->szOsFile,
        .mxPathname = real_vfs->mxPathname,
        .zName = KITE_STORE_VFS,
        .xOpen = w_open,
        .xDelete = w_delete,
        .xAccess = w_access,
        .xFullPathname = w_full_pathname,
        .xDlOpen = w_dl_open,
        .xDlError = w_dl_error,
        .xDlSym = w_dl_sym,
        .xDlClose = w_dl_close,
        .xRandomness = w_randomness,
        .xSleep = w_sleep,
        .xCurrentTime = w_current_time,
        .xGetLastError = w_get_last_error,
        .xCurrentTimeInt64 = w_current_time_int64,
    };
    walbuf_rc = sqlite3_vfs_register(&walbuf_vfs, 0);
}

int kite_store_walbuf_register(void) {
    pthread_once(&walbuf_once, walbuf_init);
    return walbuf_rc == SQLITE_OK ? 0 : -EIO;
}
