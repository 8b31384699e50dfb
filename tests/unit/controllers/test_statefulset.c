/* The StatefulSet controller's core on the fake API: the ControllerRevision it makes for a
 * template, and a name collision with a revision of other data (upstream's collisionCount). */
#include "controllers/workloads/statefulset.h"
#include "base/log.h"
#include "fakeapi.h"

#include <criterion/criterion.h>

#define S KITE_NS_PER_SEC
#define SET "/apis/apps/v1/namespaces/default/statefulsets/web"
#define REVS "/apis/apps/v1/namespaces/default/controllerrevisions"

struct env {
    struct kite_fake_clock clock;
    struct fakeapi api;
    struct kite_statefulsets *c;
};

static void env_init(struct env *e) {
    kite_log_set_level(KITE_LOG_ERROR);
    kite_fake_clock_init(&e->clock, INT64_C(1893553445) * S);
    fakeapi_init(&e->api);
    struct kite_stsctl_options o = {.client = e->api.client, .clock = &e->clock.clock};
    e->c = kite_stsctl_new(&o);
}

static void env_release(struct env *e) {
    kite_stsctl_free(e->c);
    fakeapi_release(&e->api);
}

static void set_sts(struct env *e, const char *status) {
    json_object *set = fakeapi_json(
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
        "\"uid\":\"set-uid\",\"generation\":1},\"spec\":{\"replicas\":0,\"serviceName\":\"web\","
        "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]}}},\"status\":%s}",
        status);
    json_object_put(kite_map_del(&e->api.objs, SET));
    fakeapi_put(&e->api, SET, json_object_get(set));
    kite_stsctl_set_upsert(e->c, set);
    json_object_put(set);
}

/* The name of the one ControllerRevision in the fake API other than skip (malloc'ed), or NULL. */
static char *revision_named_besides(struct env *e, const char *skip) {
    const char *k;
    void *v;
    for (size_t i = 0; kite_map_next(&e->api.objs, &i, &k, &v);)
        if (strncmp(k, REVS "/", strlen(REVS "/")) == 0 && !kite_streq(kite_meta_str(v, "name"), skip))
            return kite_strdup(kite_meta_str(v, "name"));
    return NULL;
}

/* The revision name a set's template gets with no collision. */
static char *first_name(void) {
    struct env e;
    env_init(&e);
    set_sts(&e, "{}");
    kite_stsctl_step(e.c);
    char *name = revision_named_besides(&e, NULL);
    env_release(&e);
    return name;
}

Test(statefulset, revision_named_by_template_hash) {
    _cleanup_free_ char *name = first_name();
    cr_assert_not_null(name);
    cr_assert(strncmp(name, "web-", 4) == 0, "%s", name);
    _cleanup_free_ char *again = first_name();
    cr_assert_str_eq(again, name, "the same template, the same name");
    struct env e;
    env_init(&e);
    set_sts(&e, "{}");
    kite_stsctl_step(e.c);
    json_object *st = kite_obj_get(fakeapi_get(&e.api, SET), "status");
    cr_assert_str_eq(kite_obj_str(st, "updateRevision"), name);
    cr_assert_eq(kite_obj_int(st, "collisionCount"), 0);
    cr_assert_not_null(kite_obj_get(st, "collisionCount"), "published, as upstream's status");
    env_release(&e);
}

/* CreateControllerRevision: a revision of that name already there with other data (another
 * object's) is no revision of this set; collisionCount goes up and the name is hashed again. */
Test(statefulset, name_collision_counts_and_hashes_again) {
    _cleanup_free_ char *taken = first_name();
    struct env e;
    env_init(&e);
    json_object *other = fakeapi_json(
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"ControllerRevision\",\"metadata\":{\"name\":\"%s\",\"namespace\":\"default\","
        "\"uid\":\"other-uid\",\"labels\":{\"app\":\"other\"}},\"data\":{\"spec\":{\"template\":{\"x\":1}}},\"revision\":1}",
        taken);
    _cleanup_free_ char *path = kite_asprintf(REVS "/%s", taken);
    fakeapi_put(&e.api, path, json_object_get(other));
    kite_stsctl_rev_upsert(e.c, other);
    json_object_put(other);
    set_sts(&e, "{}");
    for (int i = 0; i < 3 && kite_stsctl_step(e.c) == 0; i++) {
    }
    _cleanup_free_ char *made = revision_named_besides(&e, taken);
    cr_assert_not_null(made, "a revision under another name");
    cr_assert(strncmp(made, "web-", 4) == 0, "%s", made);
    _cleanup_free_ char *made_path = kite_asprintf(REVS "/%s", made);
    json_object *ref = json_object_array_get_idx(kite_obj_get(kite_obj_meta(fakeapi_get(&e.api, made_path)), "ownerReferences"), 0);
    cr_assert_str_eq(kite_obj_str(ref, "uid"), "set-uid");
    json_object *st = kite_obj_get(fakeapi_get(&e.api, SET), "status");
    cr_assert_eq(kite_obj_int(st, "collisionCount"), 1);
    cr_assert_str_eq(kite_obj_str(st, "updateRevision"), made);
    json_object *kept = fakeapi_get(&e.api, path);
    cr_assert_str_eq(kite_meta_str(kept, "uid"), "other-uid", "the other object's revision is left alone");
    cr_assert_eq(fakeapi_count(&e.api, "PATCH", path), 0);
    env_release(&e);
}
