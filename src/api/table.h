/* Server-side Table printing for `Accept: ...;as=Table` (research/kubectl-wire.md §3):
 * the columns and cells kube-apiserver's printers produce, per kind. */
#pragma once
#include "base/base.h"
#include "base/buf.h"

#include <json-c/json.h>

/* What a cell function sees of the object being printed. */
struct kite_table_row {
    json_object *obj; /* borrowed */
    int64_t now_s;    /* current wall seconds (for Age) */
    void *scratch;    /* the printer's scratch_size bytes, filled by its prepare(); else NULL */
};

/* A column and the function that prints its cell, declared together so that the column
 * definitions and the cells of a row cannot disagree in number or order. */
struct kite_table_column {
    const char *name;
    /* The cell's value (a new reference): a string except where upstream uses a number. */
    json_object *(*cell)(const struct kite_table_row *row);
    const char *type, *format, *description;
    int priority;
};
struct kite_table_printer {
    const struct kite_table_column *columns;
    size_t n_columns;
    /* Optional, for kinds whose cells share work (Pod, Event): scratch_size zeroed bytes are
     * handed to prepare() once per object before its cells and to release() after them. */
    size_t scratch_size;
    void (*prepare)(const struct kite_table_row *row);
    void (*release)(void *scratch);
};
/* Each kind's printer is in its row (src/api/kinds/); this one prints Name and Age for the
 * rest. Static; never freed. */
const struct kite_table_printer *kite_table_printer_default(void);
/* Appends one cell per column of p for obj (borrowed) to `cells` (a json array). */
void kite_table_cells(const struct kite_table_printer *p, json_object *obj, int64_t now_s, json_object *cells);
/* The Name and Age cells most printers share (COL_NAME, COL_AGE in src/api/kinds/kind.h). */
json_object *kite_table_cell_name(const struct kite_table_row *row);
json_object *kite_table_cell_age(const struct kite_table_row *row);
/* kubectl's HumanDuration ("45s", "5m30s", "3h12m", "30d", "2y15d", "<invalid>" for
 * negative beyond skew). */
void kite_human_duration(int64_t seconds, char out[32]);
/* Appends the columnDefinitions JSON array for p to buf. */
void kite_table_columns_json(const struct kite_table_printer *p, struct kite_buf *buf);
