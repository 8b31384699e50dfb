/* Shared informers, as client-go's SharedInformerFactory: every controller of one process asks
 * the factory for the informer of a collection (path + selector) and adds its handlers to it,
 * so one list + watch per collection feeds them all. Not thread-safe: one thread builds the
 * controllers (asks, then starts), halts and frees. */
#pragma once
#include "client/informer.h"

#define KITE_FACTORY_MAX_INFORMERS 64

struct kite_informer_factory;
/* client is borrowed: it must outlive the factory. */
struct kite_informer_factory *kite_informer_factory_new(struct kite_client *client);
/* The informer of path (+ selector: NULL, or query parameters; + project: NULL, or the members
 * it keeps, kite_informer_options' project, told apart by address; + transform, the options'
 * too), made on the first ask, with
 * h added to its handlers; NULL when it has as many handlers as it takes, or the factory is full
 * or started. The informer is the factory's (valid until kite_informer_factory_free). */
struct kite_informer *kite_informer_factory_watch(struct kite_informer_factory *f, const char *path,
                                                  const char *selector, const char *const *project,
                                                  kite_informer_transform transform,
                                                  const struct kite_informer_handlers *h);
/* Informers made from now on list through the watch (kite_informer_options' watch_list). */
void kite_informer_factory_set_watch_list(struct kite_informer_factory *f, bool on);
/* Starts every informer's thread. */
int kite_informer_factory_start(struct kite_informer_factory *f);
/* Halts every informer: no handler is called after it returns (their caches stay readable). */
void kite_informer_factory_halt(struct kite_informer_factory *f);
/* Halts (if not yet) and frees every informer. NULL is a no-op. */
void kite_informer_factory_free(struct kite_informer_factory *f);
/* How many informers (list + watch streams) it holds. */
size_t kite_informer_factory_count(const struct kite_informer_factory *f);
/* The collection of informer i (i < count), as asked for ("/api/v1/pods"). */
const char *kite_informer_factory_path(const struct kite_informer_factory *f, size_t i);
