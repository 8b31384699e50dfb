/* Server-side Table printers (kubernetes/pkg/printers/internalversion/printers.go), for the
 * kinds kubectl users look at. kube-apiserver always prints with Wide=true and lets kubectl
 * hide priority-1 columns, so every printer here emits all of its columns. Cells are strings
 * except where upstream uses numbers (Event Count). */
#include "api/table.h"
#include "api/kinds/kind.h"
#include "base/clock.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>

void kite_human_duration(int64_t seconds, char out[32]) {
    if (seconds < -1) {
        strcpy(out, "<invalid>");
        return;
    }
    if (seconds < 0) seconds = 0;
    if (seconds < 60 * 2) {
        snprintf(out, 32, "%llds", (long long)seconds);
        return;
    }
    int64_t minutes = seconds / 60;
    if (minutes < 10) {
        int64_t s = seconds % 60;
        if (s == 0)
            snprintf(out, 32, "%lldm", (long long)minutes);
        else
            snprintf(out, 32, "%lldm%llds", (long long)minutes, (long long)s);
        return;
    }
    if (minutes < 60 * 3) {
        snprintf(out, 32, "%lldm", (long long)minutes);
        return;
    }
    int64_t hours = seconds / 3600;
    if (hours < 8) {
        int64_t m = minutes % 60;
        if (m == 0)
            snprintf(out, 32, "%lldh", (long long)hours);
        else
            snprintf(out, 32, "%lldh%lldm", (long long)hours, (long long)m);
    } else if (hours < 48) {
        snprintf(out, 32, "%lldh", (long long)hours);
    } else if (hours < 24 * 8) {
        int64_t h = hours % 24;
        if (h == 0)
            snprintf(out, 32, "%lldd", (long long)(hours / 24));
        else
            snprintf(out, 32, "%lldd%lldh", (long long)(hours / 24), (long long)h);
    } else if (hours < 24 * 365 * 2) {
        snprintf(out, 32, "%lldd", (long long)(hours / 24));
    } else if (hours < 24 * 365 * 8) {
        int64_t dy = (hours / 24) % 365;
        if (dy == 0)
            snprintf(out, 32, "%lldy", (long long)(hours / 24 / 365));
        else
            snprintf(out, 32, "%lldy%lldd", (long long)(hours / 24 / 365), (long long)dy);
    } else {
        snprintf(out, 32, "%lldy", (long long)(hours / 24 / 365));
    }
}


json_object *kite_table_cell_name(const struct kite_table_row *row) {
    return cell_str(STR(row->obj, "metadata", "name"));
}

json_object *kite_table_cell_age(const struct kite_table_row *row) {
    char age[32];
    since(STR(row->obj, "metadata", "creationTimestamp"), row->now_s, age);
    return cell_str(age);
}

void kite_table_cells(const struct kite_table_printer *p, json_object *obj, int64_t now_s, json_object *cells) {
    struct kite_table_row row = {obj, now_s, NULL};
    if (p->scratch_size) row.scratch = kite_calloc(1, p->scratch_size);
    if (p->prepare) p->prepare(&row);
    for (size_t i = 0; i < p->n_columns; i++) json_object_array_add(cells, p->columns[i].cell(&row));
    if (p->release) p->release(row.scratch);
    free(row.scratch);
}

/* ---- default ---- */

static const struct kite_table_column default_cols[] = {COL_NAME, COL_AGE};
static const struct kite_table_printer default_printer = TABLE_PRINTER(default_cols);

const struct kite_table_printer *kite_table_printer_default(void) { return &default_printer; }

void kite_table_columns_json(const struct kite_table_printer *p, struct kite_buf *buf) {
    kite_buf_putc(buf, '[');
    for (size_t i = 0; i < p->n_columns; i++) {
        const struct kite_table_column *c = &p->columns[i];
        kite_buf_puts(buf, i ? ",{\"name\":" : "{\"name\":");
        kite_buf_json_str(buf, c->name);
        kite_buf_puts(buf, ",\"type\":");
        kite_buf_json_str(buf, c->type);
        kite_buf_puts(buf, ",\"format\":");
        kite_buf_json_str(buf, c->format ? c->format : "");
        kite_buf_puts(buf, ",\"description\":");
        kite_buf_json_str(buf, c->description ? c->description : "");
        kite_buf_printf(buf, ",\"priority\":%d}", c->priority);
    }
    kite_buf_putc(buf, ']');
}
