/* The agent's Node patches use the server's schema: spec.taints is atomic there (as upstream,
 * which has no patch strategy on taints), so a diff replaces the whole list. */
#include <criterion/criterion.h>

#include "agent/agent-int.h"
#include "api/registry.h"

Test(register, node_schema_is_the_servers) {
    cr_assert_eq(kite_agent_node_schema(), kite_registry_find("", "v1", "nodes")->smp);
}

Test(register, taint_change_replaces_the_whole_list) {
    json_object *from = json_tokener_parse("{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"},"
                                           "{\"key\":\"b\",\"effect\":\"NoExecute\"}]}}");
    json_object *to = json_tokener_parse("{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"}]}}");
    json_object *patch = NULL;
    cr_assert_eq(kite_smp_diff(from, to, kite_agent_node_schema(), &patch), 0);
    json_object *want = json_tokener_parse("{\"spec\":{\"taints\":[{\"key\":\"a\",\"effect\":\"NoSchedule\"}]}}");
    cr_assert(json_object_equal(patch, want), "patch %s", json_object_to_json_string(patch));
    /* and the server, applying it with its schema, ends with exactly the wanted list */
    json_object *applied = NULL;
    cr_assert_eq(kite_smp_apply(from, patch, kite_registry_find_kind("", "Node")->smp, &applied, NULL), 0);
    cr_assert(json_object_equal(applied, to), "applied %s", json_object_to_json_string(applied));
    json_object_put(applied);
    json_object_put(want);
    json_object_put(patch);
    json_object_put(to);
    json_object_put(from);
}

Test(register, conditions_still_merge_by_type) {
    json_object *from = json_tokener_parse("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"},"
                                           "{\"type\":\"MemoryPressure\",\"status\":\"False\"}]}}");
    json_object *to = json_tokener_parse("{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"},"
                                         "{\"type\":\"MemoryPressure\",\"status\":\"False\"}]}}");
    json_object *patch = NULL;
    cr_assert_eq(kite_smp_diff(from, to, kite_agent_node_schema(), &patch), 0);
    json_object *c = json_object_object_get(json_object_object_get(patch, "status"), "conditions");
    cr_assert_eq(json_object_array_length(c), 1, "patch %s", json_object_to_json_string(patch));
    json_object_put(patch);
    json_object_put(to);
    json_object_put(from);
}
