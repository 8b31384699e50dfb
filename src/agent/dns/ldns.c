/* libldns through dlopen (ldns.h says why). */
#define KITE_LDNS_LOADER
#include "agent/dns/ldns.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "base/base.h"

struct kite_ldns kite_ldns;
static char *load_error;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    void *h = dlopen(KITE_LDNS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        load_error = kite_asprintf("loading %s (Debian package libldns3): %s", KITE_LDNS_SONAME, e ? e : "not found");
        return;
    }
    struct kite_ldns t;
#define LOOKUP(name)                                                                   \
    if (!(*(void **)&t.name = dlsym(h, #name))) {                                      \
        load_error = kite_asprintf("%s has no %s", KITE_LDNS_SONAME, #name);           \
        dlclose(h);                                                                    \
        return;                                                                        \
    }
    KITE_LDNS_FUNCTIONS(LOOKUP)
#undef LOOKUP
    kite_ldns = t; /* the handle stays open for the life of the process */
}

int kite_ldns_load(char **ret_err) {
    pthread_once(&once, load);
    if (load_error) {
        if (ret_err) *ret_err = kite_strdup(load_error);
        return -ENOENT;
    }
    return 0;
}
