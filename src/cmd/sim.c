/* kite sim: N simulated nodes in one process (src/sim), each with its own identity minted from
 * the data dir's CA. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "base/log.h"
#include "client/kubeconfig.h"
#include "cmd/cmd.h"
#include "cmd/flags.h"
#include "pki/pki.h"
#include "sim/sim.h"

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

static int mint(void *ud, const char *node, char **cert, char **key) {
    const char *pki = ud;
    _cleanup_free_ char *cn = kite_asprintf("system:node:%s", node);
    const char *orgs[] = {"system:nodes"};
    return kite_pki_issue_client(pki, cn, orgs, 1, cert, key);
}

int cmd_sim(int argc, char **argv) {
    const char *kubeconfig = NULL, *data_dir = NULL, *prefix = "sim", *control = NULL;
    bool http2 = true;
    int64_t nodes = 0, pods = 0, zones = 0, conns = 0, inflight = 64, lease = 40, ramp = 200, every = 2 * KITE_NS_PER_SEC;
    const struct flag flags[] = {
        FLAG_STR("kubeconfig", "FILE", "the API server's address and CA; its credentials (an admin's) watch Nodes and pods\n"
                 "and, with --connections, impersonate the nodes",
                 NULL, &kubeconfig, .required = true),
        FLAG_STR("data-dir", "DIR", "the cluster's data dir: its pki/ CA signs each node's client certificate", NULL,
                 &data_dir, .required = true),
        FLAG_INT("nodes", "number of simulated nodes", NULL, 1, KITE_SIM_MAX_NODES, &nodes, .required = true),
        FLAG_INT("pods-per-node", "N > 0: each node runs the agent's pod manager on a fake runtime (pods bound to it\n"
                 "start and report Running) and admits N pods (maxPods); 0: pods bound to it stay Pending",
                 "0", 0, KITE_SIM_MAX_PODS_PER_NODE, &pods),
        FLAG_STR("name-prefix", "P", "node names are P-00000, P-00001, ...", "sim", &prefix),
        FLAG_INT("zones", "spread the nodes over Z zones (label topology.kubernetes.io/zone=zone-K); 0: no label", "0",
                 0, KITE_SIM_MAX_ZONES, &zones),
        FLAG_INT("connections", "N shared connections: the kubeconfig's credentials impersonate each node\n"
                 "(system:node:NAME, group system:nodes); over HTTP/2 (--http2) the --inflight lanes' requests\n"
                 "are streams of them (lane i on connection i mod N), over HTTP/1.1 one lane per connection\n"
                 "(N nodes with requests at once, overriding --inflight); 0: one kept-alive HTTP/1.1\n"
                 "connection per node with its own certificate",
                 "0", 0, KITE_SIM_MAX_INFLIGHT, &conns),
        FLAG_BOOLEAN("http2", "with --connections: speak HTTP/2 (ALPN h2), each connection multiplexing its lanes'\n"
                     "requests as a kubelet's client-go does; --http2=false: HTTP/1.1, one request at a time\n"
                     "per connection", &http2, .def = "true"),
        FLAG_INT("inflight", "nodes with requests outstanding at once (coroutine lanes of 256 KiB stack each)", "64", 1,
                 KITE_SIM_MAX_INFLIGHT, &inflight),
        FLAG_INT("lease-duration", "nodeLeaseDurationSeconds: leases renewed every quarter of it", "40", 1, 3600, &lease),
        FLAG_INT("ramp", "nodes started per second (their renewals then spread over the lease period)", "200", 1,
                 1000000, &ramp),
        FLAG_STR("control", "PATH", "the control socket (kill, revive, flap, partition, heal, slow, stats; README)", NULL, &control,
                 .def_note = "DATA_DIR/sim-PREFIX.sock"),
        FLAG_DURATION("progress-every", "interval of the progress line on stderr", "2s", 100 * KITE_NS_PER_MS, &every),
        FLAG_END,
    };
    int r = kite_cmd_flags_parse("sim",
                        "Runs N simulated nodes in one process on one event loop: each registers, reports status from a\n"
                        "synthetic machine and renews its lease with the node agent's own code, as system:node:NAME.",
                        flags, argc, argv, NULL, NULL);
    if (r != 0) return r > 0 ? 0 : 2;
    if (!*prefix || strlen(prefix) > 40) {
        fprintf(stderr, "kite sim: --name-prefix must have 1 to 40 characters\n");
        return 2;
    }
    for (const char *p = prefix; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || (*p == '-' && p != prefix))) {
            fprintf(stderr, "kite sim: --name-prefix \"%s\": lower-case letters, digits and '-' only (a DNS label)\n",
                    prefix);
            return 2;
        }
    /* one line per node registered would drown the progress lines: warnings and errors only */
    kite_log_set_level(KITE_LOG_WARN);
    struct kite_kubeconfig *kc = NULL;
    _cleanup_free_ char *err = NULL;
    if ((r = kite_kubeconfig_load(kubeconfig, NULL, &kc, &err)) < 0) {
        fprintf(stderr, "kite sim: %s\n", err ? err : strerror(-r));
        return 1;
    }
    /* one socket per open connection, plus the process's own */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    _cleanup_free_ char *pki = kite_asprintf("%s/pki", data_dir), *machines = kite_asprintf("%s/sim-%s", data_dir, prefix);
    _cleanup_free_ char *ctl = control ? kite_strdup(control) : kite_asprintf("%s/sim-%s.sock", data_dir, prefix);
    struct kite_sim_options so = {.kc = kc, .nodes = (unsigned)nodes, .prefix = prefix, .zones = (unsigned)zones,
                                  .connections = (unsigned)conns, .http2 = http2, .inflight = (unsigned)inflight, .pods_per_node = (unsigned)pods,
                                  .lease_duration_s = lease, .ramp_per_s = (unsigned)ramp, .mint = mint, .mint_ud = pki, .machines_dir = machines,
                                  .control_path = ctl, .progress = stderr, .progress_every_ns = every};
    struct kite_sim *s = NULL;
    _cleanup_free_ char *serr = NULL;
    if ((r = kite_sim_new(&so, &s, &serr)) < 0) {
        fprintf(stderr, "kite sim: %s\n", serr ? serr : strerror(-r));
        kite_kubeconfig_free(kc);
        return 1;
    }
    fprintf(stderr, "kite sim: %lld nodes %s-*, control socket %s\n", (long long)nodes, prefix, ctl);
    /* the loop thread takes SIGINT/SIGTERM itself (no other thread runs) */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    r = kite_sim_run(s, &stop_flag);
    kite_sim_free(s);
    kite_kubeconfig_free(kc);
    return r < 0 ? 1 : 0;
}
