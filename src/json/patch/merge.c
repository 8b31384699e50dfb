/* RFC 7386 JSON merge patch. */
#include "json/patch/internal.h"

/* Merges patch (borrowed) into target (owned, may be NULL); returns the owned result. */
static json_object *merge(json_object *target, json_object *patch) {
    if (!patch_is_object(patch)) {
        json_object_put(target);
        return kite_json_patch_clone(patch);
    }
    /* A non-object target is replaced by an empty object before merging (RFC 7386 §2). */
    if (!patch_is_object(target)) {
        json_object_put(target);
        target = json_object_new_object();
    }
    json_object_object_foreach(patch, k, v) {
        if (!v) {
            json_object_object_del(target, k);
            continue;
        }
        json_object *cur = NULL;
        json_object_object_get_ex(target, k, &cur);
        /* Take our own reference: re-adding the key drops the one target held. */
        json_object_object_add(target, k, merge(json_object_get(cur), v));
    }
    return target;
}

int kite_merge_patch(json_object *doc, json_object *patch, json_object **ret, char **ret_err) {
    /* Cloning first keeps doc untouched; the patch only ever edits our copy. */
    *ret = merge(patch_is_object(patch) ? kite_json_patch_clone(doc) : NULL, patch);
    return 0;
}
