/* The NodeAddress setter: InternalIP (--node-ip, else the default-route interface's IPv4
 * address, as ResolveBindAddress/ChooseHostInterface do), ExternalIP when configured, Hostname. */
#include "agent/nodestatus/internal.h"

#include <arpa/inet.h>
#include <stdio.h>

static bool is_ip(const char *s) {
    unsigned char addr[sizeof(struct in6_addr)];
    return s && (inet_pton(AF_INET, s, addr) == 1 || inet_pton(AF_INET6, s, addr) == 1);
}

static void add_address(json_object *arr, const char *type, const char *address) {
    json_object *a = json_object_new_object();
    json_object_object_add(a, "type", json_object_new_string(type));
    json_object_object_add(a, "address", json_object_new_string(address));
    json_object_array_add(arr, a);
}

int kite_ns_set_addresses(struct ns_ctx *c) {
    const struct kite_ns_config *cfg = c->cfg;
    const char *ip = c->in->ip;
    int r = c->in->ip_r; /* read by kite_nodestatus_read */
    json_object *arr;
    json_object_object_get_ex(c->status, "addresses", &arr);
    /* Without an InternalIP the Hostname is still worth reporting; the error is returned. */
    if (r == 0) add_address(arr, "InternalIP", ip);
    if (cfg->external_ip && is_ip(cfg->external_ip)) add_address(arr, "ExternalIP", cfg->external_ip);
    const char *host = cfg->hostname ? cfg->hostname : cfg->node_name;
    if (host && *host) add_address(arr, "Hostname", host);
    return r;
}
