/* core/v1 Events as client-go's recorder writes them (one builder for the controllers, the
 * agent and the apiserver's node-state reports). */
#pragma once
#include <json-c/json.h>
#include <stdint.h>

struct kite_event_spec {
    const char *ns;   /* the Event's namespace */
    const char *name; /* the Event's name; NULL: kite_event_name(obj_name, wall_ns) */
    /* involvedObject: apiVersion v1, kind, name, namespace (NULL: none, a cluster-scoped
     * object), uid and fieldPath (NULL or "": none) */
    const char *kind, *obj_name, *obj_ns, *uid, *field_path;
    const char *type, *reason, *message;
    const char *component; /* source.component and reportingComponent */
    const char *host;      /* source.host (NULL: none) */
    const char *instance;  /* reportingInstance (NULL: none) */
    int64_t wall_ns;       /* lastTimestamp (and firstTimestamp unless first_ts) */
    const char *first_ts;  /* RFC 3339 firstTimestamp of a repeated Event; NULL: wall_ns */
    int count;             /* 0: 1 */
};
/* A new Event object. */
json_object *kite_event_build(const struct kite_event_spec *s);
/* client-go's name for an Event about obj: "<obj>.<unix ns in hex>", with a process-wide
 * sequence added so two of one instant differ (malloc'ed). */
char *kite_event_name(const char *obj, int64_t wall_ns);
