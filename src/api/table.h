/* Server-side Table printing for `Accept: ...;as=Table` (research/kubectl-wire.md §3):
 * the columns and cells kube-apiserver's printers produce, per kind. */
#pragma once
#include "base/base.h"
#include "base/buf.h"

#include <json-c/json.h>

struct kite_table_column {
    const char *name, *type, *format, *description;
    int priority;
};
struct kite_table_printer {
    const struct kite_table_column *columns;
    size_t n_columns;
    /* Appends one JSON value per column to `cells` (a json array). obj is borrowed.
     * now_s: current wall seconds (for Age). */
    void (*cells)(json_object *obj, int64_t now_s, json_object *cells);
};
/* Each kind's printer is in its row (src/api/kinds/); this one prints Name and Age for the
 * rest. Static; never freed. */
const struct kite_table_printer *kite_table_printer_default(void);
/* kubectl's HumanDuration ("45s", "5m30s", "3h12m", "30d", "2y15d", "<invalid>" for
 * negative beyond skew). */
void kite_human_duration(int64_t seconds, char out[32]);
/* Appends the columnDefinitions JSON array for p to buf. */
void kite_table_columns_json(const struct kite_table_printer *p, struct kite_buf *buf);
