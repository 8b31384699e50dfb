/* YAML documents (kubeconfigs, KubeletConfiguration files) read into json-c trees, so the
 * code that interprets them walks one kind of tree. Scalars stay strings unless plain
 * (unquoted) and shaped like an integer, a boolean or null, as YAML 1.2's core schema. */
#pragma once
#include <json-c/json.h>
#include "base/base.h"
#include "base/buf.h"

/* Longest YAML input accepted: config files and kubeconfigs are a few KiB. */
#define KITE_YAML_MAX_BYTES (4u << 20)
/* Deepest nesting accepted (guards the recursive walk). */
#define KITE_YAML_MAX_DEPTH 64

/* Parses the first document of data[0..len). An empty document gives an empty object.
 * *ret is a new object (caller puts). On error returns -EINVAL (syntax, aliases to unknown
 * anchors, depth) or -EFBIG and, if ret_err is not NULL, a malloc'ed message with the line. */
int kite_yaml_parse(const char *data, size_t len, json_object **ret, char **ret_err);

/* Appends o as a YAML document to out, keys sorted and strings quoted where a reader would
 * take them for another type (null, a boolean, a number), as Kubernetes' YAML serializer
 * writes objects. -EINVAL (out unchanged) past KITE_YAML_MAX_DEPTH. */
int kite_yaml_emit(json_object *o, struct kite_buf *out);

/* Reads and parses a file. -errno from open/read as well as kite_yaml_parse's errors. */
int kite_yaml_load_file(const char *path, json_object **ret, char **ret_err);
