/* YAML → JSON parser of the client on untrusted files (kubeconfigs, agent config), and the
 * kubeconfig interpretation of the result. Relative file references resolve in an empty
 * directory so nothing is read. */
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
