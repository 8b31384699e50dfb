/* Event, served as core/v1 and as events.k8s.io/v1 (renamed fields), stored once as core/v1.
 * Events expire: the API server deletes them once older than --event-ttl. */
#include "api/kinds/kind.h"

/* ---- core/v1 Event and events.k8s.io/v1 Event ----------------------------------------------- */
STRUCT(event_source, "EventSource", F("component", S), F("host", S));
STRUCT(event_series, "EventSeries", F("count", I32), F("lastObservedTime", MT));
ROOT(kite_schema_event, "Event", TYPE_META, F("involvedObject", kite_schema_object_ref), F("reason", S), F("message", S),
    F("source", event_source), F("firstTimestamp", T), F("lastTimestamp", T), F("count", I32), F("type", S),
    F("eventTime", MT), F("series", event_series), F("action", S), F("related", kite_schema_object_ref),
    F("reportingComponent", S), F("reportingInstance", S));
ROOT(kite_schema_event_v1, "Event", TYPE_META, F("eventTime", MT), F("series", event_series),
    F("reportingController", S), F("reportingInstance", S), F("action", S), F("reason", S),
    F("regarding", kite_schema_object_ref), F("related", kite_schema_object_ref), F("note", S), F("type", S),
    F("deprecatedSource", event_source), F("deprecatedFirstTimestamp", T), F("deprecatedLastTimestamp", T),
    F("deprecatedCount", I32));

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

static const struct kite_table_column event_cols[] = {
    {"Last Seen", "string", "", "The time at which the most recent occurrence of this event was recorded.", 0},
    {"Type", "string", "", "Type of this event (Normal, Warning), new types could be added in the future", 0},
    {"Reason", "string", "",
     "This should be a short, machine understandable string that gives the reason for the transition into the "
     "object's current status.",
     0},
    {"Object", "string", "", "The object that this event is about.", 0},
    {"Subobject", "string", "", "The subobject that this event is about.", 1},
    {"Source", "string", "", "The component reporting this event. Should be a short machine understandable string.", 1},
    {"Message", "string", "", "A human-readable description of the status of this operation.", 0},
    {"First Seen", "string", "", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1},
    {"Count", "string", "", "The number of times this event has occurred.", 1},
    {"Name", "string", "name", NAME_DESC, 1},
};

static const char *first_non_empty(const char *a, const char *b) { return *a ? a : b; }

static void event_cells(json_object *obj, int64_t now_s, json_object *cells) {
    /* events.k8s.io/v1 renames the core fields; the apiserver prints both via one internal type. */
    bool v1events = OBJ(obj, "regarding") || OBJ(obj, "note") || OBJ(obj, "deprecatedSource");
    json_object *inv = v1events ? OBJ(obj, "regarding") : OBJ(obj, "involvedObject");
    const char *first_ts = STR(obj, v1events ? "deprecatedFirstTimestamp" : "firstTimestamp");
    const char *last_ts = STR(obj, v1events ? "deprecatedLastTimestamp" : "lastTimestamp");
    json_object *src = OBJ(obj, v1events ? "deprecatedSource" : "source");
    const char *message = STR(obj, v1events ? "note" : "message");
    int64_t count = int_of(OBJ(obj, v1events ? "deprecatedCount" : "count"));

    char first[32], last[32];
    since(*first_ts ? first_ts : STR(obj, "eventTime"), now_s, first);
    if (*last_ts)
        since(last_ts, now_s, last);
    else
        memcpy(last, first, sizeof(last));
    json_object *series = OBJ(obj, "series");
    if (series && json_object_is_type(series, json_type_object)) {
        since(STR(series, "lastObservedTime"), now_s, last);
        count = int_of(OBJ(series, "count"));
    } else if (count == 0) {
        count = 1; /* singleton events of the new API carry no count */
    }

    struct kite_buf b = {0};
    for (const char *k = STR(inv, "kind"); *k; k++) kite_buf_putc(&b, (char)tolower((unsigned char)*k));
    if (*STR(inv, "name")) kite_buf_printf(&b, "/%s", STR(inv, "name"));
    if (!b.p) kite_buf_puts(&b, "");

    add_str(cells, last);
    add_str(cells, STR(obj, "type"));
    add_str(cells, STR(obj, "reason"));
    add_str(cells, b.p);
    add_str(cells, STR(inv, "fieldPath"));

    kite_buf_reset(&b);
    /* core/v1 spells the reporting controller "reportingComponent" on the wire. */
    const char *component =
        first_non_empty(STR(src, "component"), STR(obj, v1events ? "reportingController" : "reportingComponent"));
    const char *host = first_non_empty(STR(src, "host"), STR(obj, "reportingInstance"));
    kite_buf_puts(&b, component);
    if (*host) kite_buf_printf(&b, ", %s", host);
    add_str(cells, b.p);

    /* strings.TrimSpace */
    size_t mlen = strlen(message);
    while (mlen && isspace((unsigned char)message[mlen - 1])) mlen--;
    while (mlen && isspace((unsigned char)*message)) message++, mlen--;
    json_object_array_add(cells, json_object_new_string_len(message, (int)mlen));

    add_str(cells, first);
    json_object_array_add(cells, json_object_new_int64(count));
    add_name(cells, obj);
    kite_buf_release(&b);
}

static const struct kite_table_printer printer = {event_cols, KITE_ARRAY_SIZE(event_cols), event_cells};

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
