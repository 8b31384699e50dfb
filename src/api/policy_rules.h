/* RBAC PolicyRules written as JSON string constants: the default roles (apiserver's bootstrap
 * policy) and each controller's ClusterRole (its descriptor row) are spelled with these. */
#pragma once

#define KITE_RULE_READ "\"get\",\"list\",\"watch\""
#define KITE_RULE_WRITE "\"create\",\"delete\",\"deletecollection\",\"patch\",\"update\""
#define KITE_RULE_CORE "\"\""
/* {"verbs":[verbs],"apiGroups":[groups],"resources":[resources]}, each a list of JSON strings */
#define KITE_RULE(verbs, groups, resources) \
    "{\"verbs\":[" verbs "],\"apiGroups\":[" groups "],\"resources\":[" resources "]}"
#define KITE_RULE_NAMES(verbs, groups, resources, names) \
    "{\"verbs\":[" verbs "],\"apiGroups\":[" groups "],\"resources\":[" resources "],\"resourceNames\":[" names "]}"
#define KITE_RULE_URLS(verbs, urls) "{\"verbs\":[" verbs "],\"nonResourceURLs\":[" urls "]}"
/* what every controller that records Events needs */
#define KITE_RULE_EVENTS KITE_RULE("\"create\",\"update\",\"patch\"", KITE_RULE_CORE ",\"events.k8s.io\"", "\"events\"")
