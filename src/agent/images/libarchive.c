/* libarchive through dlopen (libarchive.h says why). */
#include "agent/images/libarchive.h"

#include <dlfcn.h>
#include <pthread.h>

#include "base/base.h"

static struct kite_libarchive table;
static char *load_error;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *h = dlopen(KITE_LIBARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        load_error = kite_asprintf("loading %s (Debian package libarchive13): %s", KITE_LIBARCHIVE_SONAME,
                                   e ? e : "not found");
        return;
    }
    struct kite_libarchive t;
    const struct {
        const char *name;
        void **slot;
    } syms[] = {
#define SYM(n) {#n, (void **)&t.n}
        SYM(archive_entry_filetype),     SYM(archive_entry_hardlink),     SYM(archive_entry_pathname),
        SYM(archive_entry_set_hardlink), SYM(archive_entry_set_pathname), SYM(archive_entry_size),
        SYM(archive_error_string),       SYM(archive_read_data),          SYM(archive_read_data_block),
        SYM(archive_read_free),          SYM(archive_read_new),           SYM(archive_read_next_header),
        SYM(archive_read_open_filename), SYM(archive_read_support_filter_all),
        SYM(archive_read_support_format_tar), SYM(archive_write_close), SYM(archive_write_data_block),
        SYM(archive_write_disk_new),     SYM(archive_write_disk_set_options), SYM(archive_write_finish_entry),
        SYM(archive_write_free),         SYM(archive_write_header),
#undef SYM
    };
    _Static_assert(sizeof(syms) / sizeof(syms[0]) == sizeof(struct kite_libarchive) / sizeof(void *),
                   "every function of the table is looked up");
    for (size_t i = 0; i < KITE_ARRAY_SIZE(syms); i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            load_error = kite_asprintf("%s has no %s", KITE_LIBARCHIVE_SONAME, syms[i].name);
            dlclose(h);
            return;
        }
    }
    table = t; /* the handle stays open for the life of the process */
}

const struct kite_libarchive *kite_libarchive_load(char **ret_error) {
    pthread_once(&once, load);
    if (load_error) {
        if (ret_error) *ret_error = kite_strdup(load_error);
        return NULL;
    }
    return &table;
}
