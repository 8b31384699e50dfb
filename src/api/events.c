/* The Event builder (events.h). */
#include "api/events.h"
#include "api/registry.h"
#include "base/clock.h"

#include <stdatomic.h>

static _Atomic uint64_t event_seq;

char *kite_event_name(const char *obj, int64_t wall_ns) {
    return kite_asprintf("%s.%llx", obj, (unsigned long long)wall_ns + (unsigned long long)atomic_fetch_add(&event_seq, 1));
}

static void set_str(json_object *o, const char *k, const char *v) { kite_obj_set(o, k, json_object_new_string(v)); }

json_object *kite_event_build(const struct kite_event_spec *s) {
    char ts[21];
    kite_time_format(s->wall_ns, ts);
    json_object *ev = json_object_new_object(), *meta = json_object_new_object(), *io = json_object_new_object(),
                *src = json_object_new_object();
    set_str(ev, "apiVersion", "v1");
    set_str(ev, "kind", "Event");
    if (s->name) {
        set_str(meta, "name", s->name);
    } else {
        _cleanup_free_ char *n = kite_event_name(s->obj_name, s->wall_ns);
        set_str(meta, "name", n);
    }
    set_str(meta, "namespace", s->ns);
    kite_obj_set(ev, "metadata", meta);
    set_str(io, "apiVersion", "v1");
    set_str(io, "kind", s->kind);
    set_str(io, "name", s->obj_name);
    if (s->obj_ns) set_str(io, "namespace", s->obj_ns);
    if (s->uid && *s->uid) set_str(io, "uid", s->uid);
    if (s->field_path && *s->field_path) set_str(io, "fieldPath", s->field_path);
    kite_obj_set(ev, "involvedObject", io);
    set_str(ev, "reason", s->reason);
    set_str(ev, "message", s->message);
    set_str(src, "component", s->component);
    if (s->host) set_str(src, "host", s->host);
    kite_obj_set(ev, "source", src);
    set_str(ev, "firstTimestamp", s->first_ts ? s->first_ts : ts);
    set_str(ev, "lastTimestamp", ts);
    kite_obj_set(ev, "count", json_object_new_int(s->count > 0 ? s->count : 1));
    set_str(ev, "type", s->type);
    set_str(ev, "reportingComponent", s->component);
    if (s->instance) set_str(ev, "reportingInstance", s->instance);
    return ev;
}
