/* Kubernetes' protobuf wire format (application/vnd.kubernetes.protobuf), read and written
 * through the kinds' typed schemas (schema.h), so a protobuf body becomes the same json-c tree a
 * JSON body does and the rest of the server knows one shape.
 *
 * A body is the magic "k8s\0" and a runtime.Unknown {1: TypeMeta{1 apiVersion, 2 kind}, 2: the
 * object's message, 3: contentEncoding, 4: contentType}. In the message every schema field is
 * its generated.proto number: strings, bytes, objects and map entries ({1 key, 2 value}) length
 * delimited, integers and bools varints; metav1.Time and MicroTime are {1 seconds, 2 nanos},
 * resource.Quantity {1 string}, intstr.IntOrString {1 type, 2 intVal, 3 strVal}, FieldsV1
 * {1 its JSON text}. kind and apiVersion live in the envelope only.
 *
 * Decoding: unknown field numbers are skipped (as Go's decoder keeps them aside); a zero scalar
 * is dropped unless its field is KITE_SCHEMA_KEEP_ZERO (Go writes every non-pointer field, its
 * JSON omits the empty ones); times become RFC 3339 strings, quantities strings, bytes base64.
 * Encoding writes every field of the JSON object in number order, map keys sorted. */
#pragma once
#include "api/schema.h"
#include "base/buf.h"

#define KITE_PB_MEDIA_TYPE "application/vnd.kubernetes.protobuf"
#define KITE_PB_WATCH_MEDIA_TYPE "application/vnd.kubernetes.protobuf;stream=watch"
#define KITE_PB_MAGIC "k8s\0"
#define KITE_PB_MAGIC_LEN 4

/* Decodes data[0..len) (magic and envelope included) as an object of root schema s into *ret (a
 * new object with the envelope's kind and apiVersion set when given). Nesting deeper than
 * max_depth messages is refused. Returns 0; -EINVAL for a malformed body (truncated, overlong
 * varint, wrong wire type, bad magic) and -ENOTSUP for one kite cannot read (a compressed
 * envelope, a field its schema leaves untyped), with *ret_err (malloc'ed) saying which. */
int kite_pb_decode(const struct kite_schema *s, const void *data, size_t len, int max_depth, json_object **ret,
                   char **ret_err);

/* The served schema of an object kind or list kind in apiVersion (NULL when none; *ret_list
 * tells a list kind). Status is found too. */
const struct kite_schema *kite_pb_schema_for(const char *api_version, const char *kind, bool *ret_list);

/* Appends obj (of root schema s; a list of items of s when list) with magic and envelope to
 * out, its kind and apiVersion from obj. -ENOTSUP (out unchanged) when obj holds what protobuf
 * cannot carry through kite's schemas: a field the schema does not list or leaves untyped, a
 * value of the wrong type. The caller then answers JSON. */
int kite_pb_encode(const struct kite_schema *s, bool list, json_object *obj, struct kite_buf *out);

/* The same for any object kite answers with, its schema found from its kind and apiVersion
 * (kite_pb_schema_for). -ENOTSUP for one of no known schema. */
int kite_pb_encode_any(json_object *obj, struct kite_buf *out);

/* Appends one frame of a protobuf watch stream, as the raw (envelope-less) stream serializer
 * and length-delimited framer of Kubernetes write it: the 4-byte big-endian length, then a
 * metav1.WatchEvent {1: type, 2: RawExtension {1: raw}}, raw being the event's object in its
 * own enveloped encoding (kite_pb_encode_any). */
void kite_pb_watch_frame(const char *type, const void *raw, size_t raw_len, struct kite_buf *out);
