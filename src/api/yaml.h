/* YAML documents (kubeconfigs, KubeletConfiguration files) read into json-c trees, so the
 * code that interprets them walks one kind of tree. Scalars stay strings unless plain
 * (unquoted) and shaped like an integer, a boolean or null, as YAML 1.2's core schema. */
#pragma once
#include <json-c/json.h>
#include "base/base.h"
#include "base/buf.h"

/* Longest YAML input accepted: config files and kubeconfigs are a few KiB. */
#define KITE_YAML_MAX_BYTES (4u << 20)
/* Deepest nesting of mappings and sequences accepted (aliases counted as expanded). */
#define KITE_YAML_MAX_DEPTH 64
/* Most nodes (scalars, keys, collections) a document may make, aliases counted as expanded. */
#define KITE_YAML_MAX_NODES 1000000u
/* Aliases may add at most KITE_YAML_EXPANSION_RATIO times the document's own size in bytes (the
 * scalars they repeat as JSON would spell them, collections as below), or KITE_YAML_EXPANSION_MIN for small documents:
 * an alias is charged its anchor's size before it is copied. */
#define KITE_YAML_EXPANSION_RATIO 1u
#define KITE_YAML_EXPANSION_MIN (1u << 20)
/* What a mapping or sequence counts for in that size (json-c spends about this on one). */
#define KITE_YAML_COLLECTION_BYTES 64u
/* Most distinct anchors a document may define. */
#define KITE_YAML_MAX_ANCHORS 10000u
/* Most %YAML/%TAG directives before the first document (libyaml's cost is quadratic in them). */
#define KITE_YAML_MAX_DIRECTIVES 64u
/* Repeated keys named in kite_yaml_info.duplicates (the rest are counted as "..."). */
#define KITE_YAML_MAX_DUPLICATES 32u

/* What a parse found and spent. */
struct kite_yaml_info {
    /* A mapping key repeated (the last value was kept), worded as Go's yaml.v2 strict decoding
     * words it ("yaml: unmarshal errors:\n  line 3: key \"x\" already set in map"), malloc'ed;
     * NULL when none. Set on success only. */
    char *duplicates;
    /* The work done, also on error: libyaml events read, nodes made, anchors defined, bytes
     * aliases added. Each stops at its budget. */
    size_t events, nodes, anchors, expanded;
};

/* Parses the first document of data[0..len). An empty document gives an empty object.
 * *ret is a new object (caller puts). On error returns -EINVAL (syntax, aliases to unknown
 * anchors, depth, complex keys, a string holding NUL, too many directives) or -EFBIG (past the
 * byte, node, expansion or anchor budgets) and, if ret_err is not NULL, a malloc'ed message with
 * the line. info (optional) is filled as its comment says. */
int kite_yaml_parse_ex(const char *data, size_t len, json_object **ret, char **ret_err, struct kite_yaml_info *info);
int kite_yaml_parse(const char *data, size_t len, json_object **ret, char **ret_err);

/* Appends o as a YAML document to out, keys sorted and strings quoted where a reader would
 * take them for another type (null, a boolean, a number), as Kubernetes' YAML serializer
 * writes objects. -EINVAL (out unchanged) past KITE_YAML_MAX_DEPTH. */
int kite_yaml_emit(json_object *o, struct kite_buf *out);

/* Reads and parses a file. -errno from open/read as well as kite_yaml_parse's errors. */
int kite_yaml_load_file(const char *path, json_object **ret, char **ret_err);
