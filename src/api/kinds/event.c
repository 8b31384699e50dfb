/* Event, served as core/v1 and as events.k8s.io/v1 (renamed fields), stored once as core/v1.
 * Events expire: the API server deletes them once older than --event-ttl. */
#include "api/kinds/kind.h"

/* ---- core/v1 Event and events.k8s.io/v1 Event ----------------------------------------------- */
STRUCT(event_source_schema, "EventSource", F(1, "component", S), F(2, "host", S));
/* the same numbers in core/v1 and events/v1 */
STRUCT(event_series, "EventSeries", FK(1, "count", I32), F(2, "lastObservedTime", MT));
ROOT_DOC(kite_schema_event, "Event",
    "Event is a report of an event somewhere in the cluster.  Events have a limited retention time and triggers and messages may evolve with time.  Event consumers should not rely on the timing of an event with a given Reason reflecting a consistent underlying trigger, or the continued existence of events with that Reason.  Events should be treated as informative, best-effort, supplemental data.", TYPE_META, FR(2, "involvedObject", kite_schema_object_ref), F(3, "reason", S),
    F(4, "message", S), F(5, "source", event_source_schema), F(6, "firstTimestamp", T), F(7, "lastTimestamp", T),
    F(8, "count", I32), F(9, "type", S), F(10, "eventTime", MT), F(11, "series", event_series), F(12, "action", S),
    F(13, "related", kite_schema_object_ref), FK(14, "reportingComponent", S), FK(15, "reportingInstance", S));
ROOT_DOC(kite_schema_event_v1, "Event",
    "Event is a report of an event somewhere in the cluster. It generally denotes some state change in the system. Events have a limited retention time and triggers and messages may evolve with time.  Event consumers should not rely on the timing of an event with a given Reason reflecting a consistent underlying trigger, or the continued existence of events with that Reason.  Events should be treated as informative, best-effort, supplemental data.", TYPE_META, F(2, "eventTime", MT), F(3, "series", event_series),
    F(4, "reportingController", S), F(5, "reportingInstance", S), F(6, "action", S), F(7, "reason", S),
    F(8, "regarding", kite_schema_object_ref), F(9, "related", kite_schema_object_ref), F(10, "note", S),
    F(11, "type", S), F(12, "deprecatedSource", event_source_schema), F(13, "deprecatedFirstTimestamp", T),
    F(14, "deprecatedLastTimestamp", T), F(15, "deprecatedCount", I32));

static const char *const event_fields[] = {"involvedObject.kind", "involvedObject.namespace",
                                           "involvedObject.name", "involvedObject.uid",
                                           "involvedObject.apiVersion", "involvedObject.resourceVersion",
                                           "involvedObject.fieldPath", "reason", "reportingComponent",
                                           "source", "type", NULL};
static const char *const events_v1_fields[] = {"regarding.kind", "regarding.namespace", "regarding.name",
                                               "regarding.uid", "regarding.apiVersion",
                                               "regarding.resourceVersion", "regarding.fieldPath", "reason",
                                               "reportingController", "type", NULL};

static void event_validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *io = kite_obj_get(obj, "involvedObject");
    const char *ins = kite_obj_str(io, "namespace"), *ns = kite_meta_str(obj, "namespace");
    if (ins && *ins && ns && strcmp(ins, ns) != 0)
        kite_causes_add(c, "FieldValueInvalid", "involvedObject.namespace", "Invalid value: \"%s\": does not match event.namespace", ins);
}

static const char *const EVENT_TIME_FIELDS[] = {"lastTimestamp", "eventTime", "firstTimestamp"};

/* When the event last happened: lastTimestamp, eventTime (MicroTime), series.lastObservedTime,
 * or its creation time. */
static int64_t last_seen(json_object *ev) {
    int64_t t = 0, v;
    for (size_t i = 0; i < KITE_ARRAY_SIZE(EVENT_TIME_FIELDS); i++) {
        const char *s = kite_obj_str(ev, EVENT_TIME_FIELDS[i]);
        if (s && kite_time_parse(s, &v) == 0 && v > t) t = v;
    }
    const char *s = kite_obj_str(kite_obj_get(ev, "series"), "lastObservedTime");
    if (s && kite_time_parse(s, &v) == 0 && v > t) t = v;
    if (!t && (s = kite_meta_str(ev, "creationTimestamp")) && kite_time_parse(s, &v) == 0) t = v;
    return t;
}

/* events.k8s.io/v1 <-> core/v1 Event field names (the stored form is core/v1). */
static const char *const EVENT_RENAMES[][2] = {
    {"regarding", "involvedObject"},          {"note", "message"},
    {"deprecatedSource", "source"},           {"deprecatedFirstTimestamp", "firstTimestamp"},
    {"deprecatedLastTimestamp", "lastTimestamp"}, {"deprecatedCount", "count"},
    {"reportingController", "reportingComponent"},
};

static void rename_fields(json_object *obj, int from, int to) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(EVENT_RENAMES); i++) {
        json_object *v = kite_obj_get(obj, EVENT_RENAMES[i][from]);
        if (!v) continue;
        json_object_get(v);
        json_object_object_del(obj, EVENT_RENAMES[i][from]);
        json_object_object_add(obj, EVENT_RENAMES[i][to], v);
    }
}
static void event_v1_to_storage(json_object *obj) {
    rename_fields(obj, 0, 1);
    json_object_object_add(obj, "apiVersion", json_object_new_string("v1"));
}
static void event_v1_from_storage(json_object *obj) {
    rename_fields(obj, 1, 0);
    json_object_object_add(obj, "apiVersion", json_object_new_string("events.k8s.io/v1"));
}

static const char *first_non_empty(const char *a, const char *b) { return *a ? a : b; }

/* What several cells of one event share. events.k8s.io/v1 renames the core fields; the
 * apiserver prints both via one internal type. */
struct event_row {
    bool v1events;
    json_object *inv, *src;
    char first[32], last[32];
    int64_t count;
};

static void event_prepare(const struct kite_table_row *r) {
    struct event_row *e = r->scratch;
    json_object *obj = r->obj;
    e->v1events = OBJ(obj, "regarding") || OBJ(obj, "note") || OBJ(obj, "deprecatedSource");
    e->inv = e->v1events ? OBJ(obj, "regarding") : OBJ(obj, "involvedObject");
    e->src = OBJ(obj, e->v1events ? "deprecatedSource" : "source");
    const char *first_ts = STR(obj, e->v1events ? "deprecatedFirstTimestamp" : "firstTimestamp");
    const char *last_ts = STR(obj, e->v1events ? "deprecatedLastTimestamp" : "lastTimestamp");
    e->count = int_of(OBJ(obj, e->v1events ? "deprecatedCount" : "count"));

    since(*first_ts ? first_ts : STR(obj, "eventTime"), r->now_s, e->first);
    if (*last_ts)
        since(last_ts, r->now_s, e->last);
    else
        memcpy(e->last, e->first, sizeof(e->last));
    json_object *series = OBJ(obj, "series");
    if (series && json_object_is_type(series, json_type_object)) {
        since(STR(series, "lastObservedTime"), r->now_s, e->last);
        e->count = int_of(OBJ(series, "count"));
    } else if (e->count == 0) {
        e->count = 1; /* singleton events of the new API carry no count */
    }
}

static json_object *event_last_seen(const struct kite_table_row *r) { return cell_str(((struct event_row *)r->scratch)->last); }
static json_object *event_first_seen(const struct kite_table_row *r) { return cell_str(((struct event_row *)r->scratch)->first); }
static json_object *event_count(const struct kite_table_row *r) { return json_object_new_int64(((struct event_row *)r->scratch)->count); }
static json_object *event_type(const struct kite_table_row *r) { return cell_str(STR(r->obj, "type")); }
static json_object *event_reason(const struct kite_table_row *r) { return cell_str(STR(r->obj, "reason")); }
static json_object *event_subobject(const struct kite_table_row *r) {
    return cell_str(STR(((struct event_row *)r->scratch)->inv, "fieldPath"));
}

/* "<lowercased kind>/<name>" of the object the event is about */
static json_object *event_object(const struct kite_table_row *r) {
    json_object *inv = ((struct event_row *)r->scratch)->inv;
    struct kite_buf b = {0};
    for (const char *k = STR(inv, "kind"); *k; k++) kite_buf_putc(&b, (char)tolower((unsigned char)*k));
    if (*STR(inv, "name")) kite_buf_printf(&b, "/%s", STR(inv, "name"));
    json_object *cell = cell_str(b.p ? b.p : "");
    kite_buf_release(&b);
    return cell;
}

static json_object *event_source(const struct kite_table_row *r) {
    const struct event_row *e = r->scratch;
    /* core/v1 spells the reporting controller "reportingComponent" on the wire. */
    const char *component =
        first_non_empty(STR(e->src, "component"), STR(r->obj, e->v1events ? "reportingController" : "reportingComponent"));
    const char *host = first_non_empty(STR(e->src, "host"), STR(r->obj, "reportingInstance"));
    struct kite_buf b = {0};
    kite_buf_puts(&b, component);
    if (*host) kite_buf_printf(&b, ", %s", host);
    json_object *cell = cell_str(b.p);
    kite_buf_release(&b);
    return cell;
}

static json_object *event_message(const struct kite_table_row *r) {
    const char *message = STR(r->obj, ((struct event_row *)r->scratch)->v1events ? "note" : "message");
    /* strings.TrimSpace */
    size_t mlen = strlen(message);
    while (mlen && isspace((unsigned char)message[mlen - 1])) mlen--;
    while (mlen && isspace((unsigned char)*message)) message++, mlen--;
    return json_object_new_string_len(message, (int)mlen);
}

static const struct kite_table_column event_cols[] = {
    {"Last Seen", event_last_seen, "string", "", "The time at which the most recent occurrence of this event was recorded.", 0},
    {"Type", event_type, "string", "", "Type of this event (Normal, Warning), new types could be added in the future", 0},
    {"Reason", event_reason, "string", "",
     "This should be a short, machine understandable string that gives the reason for the transition into the "
     "object's current status.",
     0},
    {"Object", event_object, "string", "", "The object that this event is about.", 0},
    {"Subobject", event_subobject, "string", "", "The subobject that this event is about.", 1},
    {"Source", event_source, "string", "", "The component reporting this event. Should be a short machine understandable string.", 1},
    {"Message", event_message, "string", "", "A human-readable description of the status of this operation.", 0},
    {"First Seen", event_first_seen, "string", "", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1},
    {"Count", event_count, "string", "", "The number of times this event has occurred.", 1},
    {"Name", kite_table_cell_name, "string", "name", NAME_DESC, 1},
};

static const struct kite_table_printer printer =
    TABLE_PRINTER(event_cols, .scratch_size = sizeof(struct event_row), .prepare = event_prepare);

const struct kite_resource kite_kind_event = {
    .schema = &kite_schema_event,
    KITE_CORE_V1, .kind = "Event", .list_kind = "EventList", .plural = "events", .singular = "event",
    .short_names = {"ev"}, .namespaced = true, .unconditional_update = true, .create_on_update = true,
    .status_on_create = true, .smp = &kite_meta_smp_schema, .table = &printer,
    .fields = event_fields, .last_seen = last_seen, .validate = event_validate,
};

const struct kite_resource kite_kind_event_v1 = {
    .schema = &kite_schema_event_v1,
    KITE_GROUP_VERSION("events.k8s.io", "v1"), .kind = "Event", .list_kind = "EventList", .plural = "events",
    .singular = "event", .short_names = {"ev"}, .storage = "events", .namespaced = true,
    .unconditional_update = true, .create_on_update = true, .status_on_create = true,
    .smp = &kite_meta_smp_schema, .table = &printer, .fields = events_v1_fields, .validate = event_validate,
    .last_seen = last_seen,
    .to_storage = event_v1_to_storage, .from_storage = event_v1_from_storage,
};
