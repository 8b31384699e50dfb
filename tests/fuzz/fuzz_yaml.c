/* YAML → JSON parser on untrusted files (kubeconfigs, agent config) and request bodies, the
 * kubeconfig interpretation of the result, and the YAML emitter: what it writes of a parsed
 * tree parses back to the same tree. Relative file references resolve in an empty directory
 * so nothing is read. */
#include "fuzz_common.h"
#include "client/kubeconfig.h"
#include "api/yaml.h"

#include <stdio.h>

static char dir[] = "/tmp/kite-fuzz-yaml-XXXXXX";
static bool made;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (!made) {
        if (!mkdtemp(dir)) abort();
        made = true;
    }
    json_object *root = NULL;
    char *err = NULL;
    int r = kite_yaml_parse((const char *)data, n, &root, &err);
    if (r == 0) {
        if (!root) abort();
        /* the tree must serialize (no cycles from aliases) */
        (void)json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
        struct kite_buf y = {0};
        if (kite_yaml_emit(root, &y) == 0) {
            json_object *again = NULL;
            char *err2 = NULL;
            if (kite_yaml_parse(y.p ? y.p : "", y.len, &again, &err2) != 0 || !json_object_equal(root, again)) {
                fprintf(stderr, "emitted YAML does not read back: %s\n%.*s\n", err2 ? err2 : "(differs)", (int)y.len,
                        y.p ? y.p : "");
                abort();
            }
            json_object_put(again);
            free(err2);
        }
        kite_buf_release(&y);
        struct kite_kubeconfig *k = NULL;
        char *kerr = NULL;
        if (kite_kubeconfig_from_json(root, NULL, dir, &k, &kerr) == 0) {
            if (!k || !k->server) abort();
            kite_kubeconfig_free(k);
        }
        free(kerr);
        json_object_put(root);
    } else if (r != -EINVAL && r != -EFBIG) {
        fprintf(stderr, "unexpected error %d\n", r);
        abort();
    }
    free(err);
    return 0;
}
