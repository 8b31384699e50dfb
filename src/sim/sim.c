/* kite sim's loop (sim.h). One thread: a min-heap of nodes by next due time, a few coroutine
 * lanes (ucontext) running kite_agent_step(), one epoll set for the lanes' sockets and the
 * control socket. Per node only what the agent keeps between steps (its struct, the last
 * acknowledged status and Lease, its client and, while open, its TLS connection) plus this
 * file's struct sim_node. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/pods/pods.h"
#include "agent/runtime/runtime.h"
#include "api/registry.h"
#include "base/buf.h"
#include "base/log.h"
#include "base/version.h"
#include "client/client.h"
#include "client/informer.h"
#include <sys/eventfd.h>
#include "sim/fiber.h"
#include "sim/h2c.h"
#include "sim/sim.h"

#define SIM_LOG "sim"
#define NO_POS UINT32_MAX
/* A heap entry's bit for a node's pod manager step (struct sim_step). */
#define POD_TASK UINT32_C(0x80000000)
#define HIST_BUCKETS 128 /* 4 per octave of microseconds: up to 2^32 us */
#define CONTROL_MAX_LINE 65536
#define SIM_REQUEST_TIMEOUT_MS 10000 /* the agent's heartbeat timeout: min(nodeStatusUpdateFrequency, leaseDuration) */
#define SIM_LIVE_TTL_NS KITE_NS_PER_SEC /* a shape's MemAvailable and tasks, read at most this often */

/* A node's step on a lane: its agent's or, split (shared connections and pods), its pod
 * manager's, on a lane of its own as a kubelet's pod workers run beside its lease renewals
 * (unsplit, the pod manager steps after the agent). A heap entry names it: the node's index, with
 * POD_TASK for the pod manager's. */
struct sim_step {
    int64_t due;       /* mono ns it next has work */
    uint32_t heap_pos; /* NO_POS: not in its heap (running or dead) */
    bool running;
    bool kick; /* an event came while it ran: due again at once */
};
enum { STEP_AGENT, STEP_PODS };

struct sim_node {
    struct kite_agent *agent; /* NULL: not started yet, or dead */
    struct kite_client *client; /* a struct sim_client */
    struct sim_step step[2];  /* [STEP_AGENT], [STEP_PODS] */
    int64_t flap_next;        /* mono ns of the next flip; 0 = not flapping */
    uint32_t flap_period_s;
    uint32_t slow_ms;         /* each request waits this long before it is sent */
    bool dead, partitioned;
    bool ran;                 /* started before (a revived node) */
    struct kite_pods *pods;   /* --pods-per-node: its pods on its own fake runtime */
    struct kite_runtime *rt;
};

/* A pod event (type, pod) or a Node watch event (type NULL, the event) for node `node`, from
 * the watch threads to the loop. */
struct pod_ev {
    uint32_t node;
    const char *type;
    json_object *pod;
};

/* A node's client: its requests go out on its own connection (own, with the node's certificate)
 * or on the connection of the lane running it (shared mode: as the node, by impersonation);
 * a partitioned node's fail without leaving, a slow node's wait first. */
struct sim_client {
    struct kite_client base;
    struct kite_sim *s;
    struct kite_client *own; /* NULL in shared mode */
    uint32_t node;
};

struct lane {
    struct kite_fiber fib; /* runs lane_loop: one node step after another */
    void *stack;
    uint32_t node; /* NO_POS: free */
    unsigned step; /* which of the node's steps it runs (STEP_AGENT, STEP_PODS) */
    bool done;
    bool starting; /* runs a node's first step (its registration) */
    bool sleeping; /* parked until deadline_ms only (a slow node's request) */
    bool h2wait;   /* parked on its HTTP/2 stream (req) until it closes or deadline_ms */
    bool h2ready;  /* on the loop's ready list */
    struct h2c_req req;
    /* a parked wait */
    int fd;
    int64_t deadline_ms; /* < 0: none */
    int result;
};

struct task_heap {
    uint32_t *v;
    uint32_t len;
};

struct shape {
    char *sysroot;
    struct kite_ns_cache *cache; /* its facts and readings, shared by every node of the shape */
    struct kite_runtime *rt;
    struct kite_image *imgs; /* what its runtime has (and each node's pod runtime) */
    size_t n_imgs;
    int cpus;
    uint64_t disk_bytes;
    uint64_t images_gen; /* changes with its runtime's images (set once, in make_shape) */
};

struct kite_sim {
    struct kite_sim_options o;
    struct kite_kubeconfig kc; /* server, CA; each node's own cert and key per client */
    struct kite_agent_config *cfg; /* one per zone (labels differ) */
    unsigned ncfg;
    struct shape shapes[KITE_SIM_SHAPES];
    struct sim_node *nodes;
    /* the steps due: the nodes' agents', and (split) their pod managers', which take at most half
     * the lanes, so that a burst of pod work does not hold back the lease renewals */
    struct task_heap heap, pheap;
    unsigned lanes_pods;
    bool split; /* a node's pod manager steps on a lane of its own (struct sim_node) */
    struct lane *lanes;
    unsigned nlanes, lanes_busy, lanes_starting;
    unsigned *lane_free; /* indices of the free lanes, a stack: the top is the next one given */
    unsigned n_lane_free;
    /* nodes not started yet start in index order, node i not before start0 + i / ramp, and in
     * at most half the lanes: the started nodes' renewals come first, so a ramp faster than the
     * server registers nodes slows the ramp rather than starving the leases */
    uint32_t next_start;
    int64_t start0;
    struct kite_fiber loop_fib;
    struct lane *cur;
    int epfd, ctl_fd;
    struct kite_client **pool; /* shared mode over HTTP/1.1: one connection per lane */
    /* shared mode over HTTP/2: connections lanes share (lane i uses h2[i % nh2]); the lanes whose
     * stream closed wait in ready for the loop to resume them */
    struct kite_client *h2dial;
    struct h2c **h2;
    unsigned nh2;
    unsigned char *h2tags; /* epoll data.ptr of h2[k]: &h2tags[k] */
    uint32_t *ready;
    size_t nready;
    /* pods_per_node: one informer on every pod, its events queued for the loop */
    struct kite_client *pods_client;
    char *pods_root; /* the pods' volumes, <machines_dir>/pods/<uid> (uids differ across nodes) */
    struct kite_informer *pods_inf;
    pthread_mutex_t ev_lock;
    struct pod_ev *evq;
    size_t n_evq, cap_evq;
    int ev_fd;
    /* the Node watch: what others write to the nodes (Unknown conditions, deletions) */
    struct kite_client *watch_client;
    pthread_t watch_thread;
    bool watching;
    struct kite_cancel watch_cancel;
    uint32_t *flapping;
    size_t nflapping, cap_flapping;
    int name_width;
    /* counters */
    unsigned started;
    uint64_t renewals, patches, registrations, requests, mint_errors;
    uint64_t hist[HIST_BUCKETS], hist_iv[HIST_BUCKETS];
    int64_t lag_max_ns;
    long rss_start_kb;
};

/* The simulator the loop thread runs (the status source and the lanes find it here). */
static __thread struct kite_sim *sim_current;

/* ---- time, histogram ---- */

static int64_t mono(void) { return kite_now_mono(kite_clock_real()); }

static unsigned bucket_of(int64_t ns) {
    double us = (double)ns / 1000.0;
    if (us < 1) return 0;
    unsigned b = (unsigned)(log2(us) * 4) + 1;
    return b >= HIST_BUCKETS ? HIST_BUCKETS - 1 : b;
}
/* The upper bound of bucket b, ms. */
static double bucket_ms(unsigned b) { return b == 0 ? 0.001 : pow(2.0, (double)b / 4.0) / 1000.0; }

static double hist_quantile(const uint64_t *h, double q) {
    uint64_t total = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) total += h[i];
    if (!total) return 0;
    uint64_t want = (uint64_t)ceil(q * (double)total), seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h[i];
        if (seen >= want) return bucket_ms(i);
    }
    return bucket_ms(HIST_BUCKETS - 1);
}

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
}

/* ---- heap of nodes by due time ---- */

static uint32_t task_of(uint32_t i, unsigned step) { return step == STEP_PODS ? i | POD_TASK : i; }

static struct sim_step *step_of(struct kite_sim *s, uint32_t t) {
    return &s->nodes[t & ~POD_TASK].step[t & POD_TASK ? STEP_PODS : STEP_AGENT];
}

/* A step of the node is on a lane. */
static bool node_busy(const struct sim_node *n) { return n->step[STEP_AGENT].running || n->step[STEP_PODS].running; }

static bool heap_less(struct kite_sim *s, uint32_t a, uint32_t b) { return step_of(s, a)->due < step_of(s, b)->due; }

/* The heap a step waits in: the agents' or the pod managers'. */
static struct task_heap *heap_of(struct kite_sim *s, uint32_t t) { return t & POD_TASK ? &s->pheap : &s->heap; }

static void heap_set(struct kite_sim *s, struct task_heap *h, uint32_t pos, uint32_t n) {
    h->v[pos] = n;
    step_of(s, n)->heap_pos = pos;
}

static void heap_up(struct kite_sim *s, struct task_heap *h, uint32_t pos) {
    uint32_t n = h->v[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!heap_less(s, n, h->v[parent])) break;
        heap_set(s, h, pos, h->v[parent]);
        pos = parent;
    }
    heap_set(s, h, pos, n);
}

static void heap_down(struct kite_sim *s, struct task_heap *h, uint32_t pos) {
    uint32_t n = h->v[pos];
    for (;;) {
        uint32_t l = 2 * pos + 1, r = l + 1, m = pos;
        uint32_t best = n;
        if (l < h->len && heap_less(s, h->v[l], best)) m = l, best = h->v[l];
        if (r < h->len && heap_less(s, h->v[r], best)) m = r, best = h->v[r];
        if (m == pos) break;
        heap_set(s, h, pos, best);
        pos = m;
    }
    heap_set(s, h, pos, n);
}

static void heap_push(struct kite_sim *s, uint32_t n) {
    struct task_heap *h = heap_of(s, n);
    heap_set(s, h, h->len++, n);
    heap_up(s, h, h->len - 1);
}

static void heap_remove(struct kite_sim *s, uint32_t n) {
    struct task_heap *h = heap_of(s, n);
    uint32_t pos = step_of(s, n)->heap_pos;
    if (pos == NO_POS) return;
    step_of(s, n)->heap_pos = NO_POS;
    uint32_t last = h->v[--h->len];
    if (pos == h->len) return;
    heap_set(s, h, pos, last);
    heap_up(s, h, pos);
    heap_down(s, h, step_of(s, last)->heap_pos);
}

static uint32_t heap_pop(struct kite_sim *s, struct task_heap *h) {
    uint32_t n = h->v[0];
    heap_remove(s, n);
    return n;
}

/* ---- synthetic machines ---- */

static const struct {
    int cpus, mem_gib, disk_gib, images;
    const char *kernel, *os;
} shape_defs[KITE_SIM_SHAPES] = {
    {2, 4, 50, 3, "6.1.0-25-amd64", "Debian GNU/Linux 12 (bookworm)"},
    {4, 8, 100, 6, "6.1.0-25-amd64", "Debian GNU/Linux 12 (bookworm)"},
    {8, 16, 200, 9, "6.8.0-45-generic", "Ubuntu 24.04.1 LTS"},
    {16, 32, 200, 12, "6.8.0-45-generic", "Ubuntu 24.04.1 LTS"},
    {32, 64, 500, 15, "5.14.0-427.el9.x86_64", "Rocky Linux 9.4 (Blue Onyx)"},
    {64, 128, 1000, 18, "6.1.0-25-amd64", "Debian GNU/Linux 12 (bookworm)"},
    {96, 256, 2000, 21, "6.6.44-flatcar", "Flatcar Container Linux by Kinvolk 3975.2.0"},
    {128, 512, 4000, 24, "6.8.0-45-generic", "Ubuntu 24.04.1 LTS"},
};

static int write_file(const char *root, const char *rel, const char *text) {
    _cleanup_free_ char *path = kite_asprintf("%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0755) < 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    if (!f) return -errno;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -errno;
}

static int make_shape(struct kite_sim *s, unsigned k, char **err) {
    struct shape *sh = &s->shapes[k];
    sh->sysroot = kite_asprintf("%s/machine-%u", s->o.machines_dir, k);
    if (mkdir(sh->sysroot, 0755) < 0 && errno != EEXIST) {
        *err = kite_asprintf("creating %s: %s", sh->sysroot, strerror(errno));
        return -errno;
    }
    /* one machine read for all its nodes: facts every 5 minutes, MemAvailable at most once a second */
    sh->cache = kite_ns_cache_new(sh->sysroot, KITE_NS_FACTS_TTL_NS, SIM_LIVE_TTL_NS);
    sh->cpus = shape_defs[k].cpus;
    sh->disk_bytes = (uint64_t)shape_defs[k].disk_gib << 30;
    long mem_kb = (long)shape_defs[k].mem_gib << 20;
    _cleanup_free_ char *meminfo = kite_asprintf("MemTotal: %ld kB\nMemFree: %ld kB\nMemAvailable: %ld kB\n", mem_kb,
                                                 mem_kb / 2, mem_kb * 3 / 4);
    _cleanup_free_ char *osr = kite_asprintf("PRETTY_NAME=\"%s\"\n", shape_defs[k].os);
    _cleanup_free_ char *kernel = kite_asprintf("%s\n", shape_defs[k].kernel);
    _cleanup_free_ char *mid = kite_asprintf("5ca1ab1e00000000000000000000%04x\n", k);
    _cleanup_free_ char *uuid = kite_asprintf("5ca1ab1e-0000-0000-0000-00000000%04x\n", k);
    struct { const char *rel, *text; } files[] = {
        {"proc/meminfo", meminfo},
        {"proc/loadavg", "0.10 0.20 0.30 2/400 1234\n"},
        {"proc/sys/kernel/osrelease", kernel},
        {"proc/sys/kernel/arch", "x86_64\n"},
        {"proc/sys/kernel/pid_max", "4194304\n"},
        {"proc/sys/kernel/threads-max", "1000000\n"},
        {"proc/sys/kernel/random/boot_id", "b007b007-0000-0000-0000-000000000000\n"},
        {"etc/os-release", osr},
        {"etc/machine-id", mid},
        {"sys/class/dmi/id/product_uuid", uuid},
        {"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0\n"},
    };
    for (size_t i = 0; i < KITE_ARRAY_SIZE(files); i++) {
        int r = write_file(sh->sysroot, files[i].rel, files[i].text);
        if (r < 0) {
            *err = kite_asprintf("writing machine %s/%s: %s", sh->sysroot, files[i].rel, strerror(-r));
            return r;
        }
    }
    _cleanup_free_ char *version = kite_asprintf("1.7.%u", 10 + k);
    sh->rt = kite_runtime_fake_new(version);
    int n = shape_defs[k].images + 1;
    struct kite_image *imgs = kite_calloc((size_t)n, sizeof *imgs);
    /* one image every machine has: a workload can run on any simulated node */
    imgs[0].names = kite_calloc(1, sizeof(char *));
    imgs[0].names[0] = kite_strdup(KITE_SIM_COMMON_IMAGE);
    imgs[0].n_names = 1;
    imgs[0].size_bytes = 7654321;
    imgs[0].id = kite_asprintf("sha256:%064x", 0x5ca1ab1e);
    for (int i = 1; i < n; i++) {
        imgs[i].names = kite_calloc(2, sizeof(char *));
        imgs[i].names[0] = kite_asprintf("registry.example/app-%d@sha256:%064x", i, i * 7919 + 1);
        imgs[i].names[1] = kite_asprintf("registry.example/app-%d:v%d.%u", i, i % 5 + 1, k);
        imgs[i].n_names = 2;
        imgs[i].size_bytes = (int64_t)(i + 1) * 12345678 + (int64_t)k * 1000003;
        imgs[i].id = kite_asprintf("sha256:%064x", i * 7919 + 1);
    }
    kite_runtime_fake_set_images(sh->rt, imgs, (size_t)n);
    sh->images_gen++;
    sh->imgs = imgs;
    sh->n_imgs = (size_t)n;
    return 0;
}

/* ---- per-node status source: the real setters over the node's machine ---- */

struct status_ctx {
    struct kite_sim *s;
    uint32_t i;
};

static uint32_t node_index(struct kite_sim *s, struct sim_node *n) { return (uint32_t)(n - s->nodes); }

static void node_ip(uint32_t i, char *buf, size_t len) {
    uint32_t net = i / 254, host = i % 254 + 1;
    snprintf(buf, len, "10.%u.%u.%u", 64 + net / 256, net % 256, host);
}

static int src_statfs(const char *path, uint64_t *total, uint64_t *avail, uint64_t *inodes, uint64_t *ifree,
                      void *ud) {
    struct status_ctx *c = ud;
    const struct shape *sh = &c->s->shapes[c->i % KITE_SIM_SHAPES];
    *total = sh->disk_bytes;
    *avail = sh->disk_bytes / 10 * 7;
    *inodes = sh->disk_bytes >> 14;
    *ifree = *inodes / 10 * 9;
    return 0;
}

static int src_route(char *buf, size_t len, void *ud) {
    struct status_ctx *c = ud;
    node_ip(c->i, buf, len);
    return 0;
}

static int src_cpus(void *ud) {
    struct status_ctx *c = ud;
    return c->s->shapes[c->i % KITE_SIM_SHAPES].cpus;
}

static int src_images_gen(void *ud, uint64_t *ret) {
    struct status_ctx *c = ud;
    *ret = c->s->shapes[c->i % KITE_SIM_SHAPES].images_gen;
    return 0;
}

/* The node's status source (agent.h, kite_agent_status_source): its config and sources are
 * made on the stack for each step, the same for the read and its build. */
struct node_src {
    char name[128];
    struct status_ctx c;
    struct kite_ns_config cfg;
    struct kite_ns_sources src;
};

static void node_src_init(struct sim_node *n, struct node_src *ns) {
    struct kite_sim *s = sim_current;
    uint32_t i = node_index(s, n);
    const struct shape *sh = &s->shapes[i % KITE_SIM_SHAPES];
    kite_sim_node_name(s, i, ns->name, sizeof ns->name);
    ns->cfg = s->cfg[0].ns;
    ns->cfg.node_name = ns->name;
    ns->cfg.root_dir = "/";
    ns->cfg.kubelet_version = KITE_VERSION;
    /* a simulated node serves no log or metrics endpoint: it publishes port 0, as an agent whose
     * endpoint did not start, so the server's metrics scraper and log proxy do not dial it (a
     * scrape of 10,000 nodes every 15 s was most of kite up's CPU in the 10,000-node run) */
    ns->cfg.daemon_port = 0;
    ns->c = (struct status_ctx){s, i};
    ns->src = (struct kite_ns_sources){.sysroot = sh->sysroot, .runtime = sh->rt, .statfs = src_statfs,
                                       .default_route_ip = src_route, .online_cpus = src_cpus,
                                       .images_gen = src_images_gen, .ud = &ns->c, .cache = sh->cache,
                                       .runtime_ready = true, .pleg_healthy = true};
}

static int node_status_read(void *ud, void **ret, uint64_t *ret_digest) {
    struct node_src ns;
    node_src_init(ud, &ns);
    struct kite_ns_inputs *in = NULL;
    int r = kite_nodestatus_read(&ns.cfg, &ns.src, &in);
    if (r < 0) return r;
    *ret_digest = kite_ns_inputs_digest(in);
    *ret = in;
    return 0;
}

static int node_status_build(void *ud, void *in, json_object *prev, json_object **ret, struct kite_ns_events *ev) {
    struct sim_node *n = ud;
    struct node_src ns;
    node_src_init(n, &ns);
    /* allocatable (admission) and the InternalIP (pods' hostIP) as the server acknowledged them;
     * a sync that builds nothing has an acknowledged status already given here */
    if (n->pods && prev) kite_pods_node_status(n->pods, prev);
    return kite_nodestatus_build(&ns.cfg, &ns.src, in, prev, ret, ev);
}

static void node_status_release(void *ud, void *in) { kite_ns_inputs_free(in); }

static const struct kite_agent_status_source node_status = {node_status_read, node_status_build,
                                                            node_status_release};

/* ---- node lifecycle ---- */

/* PREFIX-NNNNN, i zero-padded to name_width: snprintf's "%s-%0*u" by hand (it runs for every
 * request; vfprintf was ~4% of the simulator's CPU). Cut to len - 1 bytes as snprintf would. */
void kite_sim_node_name(struct kite_sim *s, unsigned i, char *buf, size_t len) {
    if (!len) return;
    char digits[16];
    int nd = 0;
    do digits[nd++] = (char)('0' + i % 10), i /= 10;
    while (i && nd < (int)sizeof digits);
    size_t pl = strlen(s->o.prefix), at = 0;
    for (size_t k = 0; k < pl && at + 1 < len; k++) buf[at++] = s->o.prefix[k];
    if (at + 1 < len) buf[at++] = '-';
    for (int k = nd; k < s->name_width && at + 1 < len; k++) buf[at++] = '0';
    while (nd > 0 && at + 1 < len) buf[at++] = digits[--nd];
    buf[at] = 0;
}

/* Node index of a name, or -1. */
static long name_index(struct kite_sim *s, const char *name) {
    size_t pl = strlen(s->o.prefix);
    if (strncmp(name, s->o.prefix, pl) || name[pl] != '-' || !name[pl + 1]) return -1;
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(name + pl + 1, &end, 10);
    if (errno || *end || v >= s->o.nodes) return -1;
    char check[128];
    kite_sim_node_name(s, (unsigned)v, check, sizeof check);
    return strcmp(check, name) ? -1 : (long)v;
}

static void lane_sleep(struct kite_sim *s, int64_t deadline_ms);
static void heap_push(struct kite_sim *s, uint32_t n);
static void heap_remove(struct kite_sim *s, uint32_t n);

/* ---- pods (--pods-per-node) ---- */

/* Informer thread: queues the events of pods bound to simulated nodes for the loop. */
static void ev_push(struct kite_sim *s, long i, const char *type, json_object *pod) {
    /* a copy of its own: json-c's reference counts are not atomic, and the watch thread drops
     * its object while the loop reads this one */
    json_object *copy = NULL;
    json_object_deep_copy(pod, &copy, NULL);
    pthread_mutex_lock(&s->ev_lock);
    if (s->n_evq == s->cap_evq) {
        s->cap_evq = s->cap_evq ? 2 * s->cap_evq : 64;
        s->evq = kite_realloc(s->evq, s->cap_evq * sizeof *s->evq);
    }
    s->evq[s->n_evq++] = (struct pod_ev){(uint32_t)i, type, copy};
    pthread_mutex_unlock(&s->ev_lock);
    uint64_t one = 1;
    ssize_t w = write(s->ev_fd, &one, sizeof one);
    (void)w; /* a full counter is still readable */
}

static void pods_enqueue(struct kite_sim *s, const char *type, json_object *pod) {
    const char *node = kite_obj_str_at(pod, "spec", "nodeName");
    long i = node ? name_index(s, node) : -1;
    if (i >= 0) ev_push(s, i, type, pod);
}

/* Watch thread: a simulated node's agent hears of its Node as a kubelet's informer would, but
 * only of what it did not write itself, to keep no copy of every Node: a deletion, or a Ready
 * condition other than True (the node lifecycle controller's Unknown), which its next status
 * report then corrects. */
static int on_node_event(json_object *ev, void *ud) {
    struct kite_sim *s = ud;
    const char *type = json_object_get_string(json_object_object_get(ev, "type"));
    json_object *obj = json_object_object_get(ev, "object");
    const char *name = kite_obj_str_at(obj, "metadata", "name");
    long i = name ? name_index(s, name) : -1;
    if (i < 0) return 0;
    bool forward = kite_streq(type, "DELETED");
    if (kite_streq(type, "ADDED") || kite_streq(type, "MODIFIED")) {
        json_object *conds = NULL, *st = json_object_object_get(obj, "status");
        bool ready = false;
        if (json_object_object_get_ex(st, "conditions", &conds))
            for (size_t k = 0; k < json_object_array_length(conds); k++) {
                json_object *c = json_object_array_get_idx(conds, k);
                if (kite_streq(json_object_get_string(json_object_object_get(c, "type")), "Ready"))
                    ready = kite_streq(json_object_get_string(json_object_object_get(c, "status")), "True");
            }
        forward = conds && !ready;
    }
    if (forward) ev_push(s, i, NULL, ev);
    return 0;
}

static void *node_watch_thread(void *ud) {
    struct kite_sim *s = ud;
    const char *path = "/api/v1/nodes?watch=true&labelSelector=kite.dev%2Fsimulated%3Dtrue";
    while (!kite_cancel_fired(&s->watch_cancel)) {
        int r = kite_client_watch(s->watch_client, path, on_node_event, s, &s->watch_cancel);
        if (r == -ECANCELED) break;
        kite_cancel_wait(&s->watch_cancel, KITE_NS_PER_SEC); /* the server ended it, or failed */
    }
    return NULL;
}
static void on_pod_add(void *ud, json_object *o) { pods_enqueue(ud, "ADDED", o); }
static void on_pod_update(void *ud, json_object *old, json_object *o) { pods_enqueue(ud, "MODIFIED", o); }
static void on_pod_del(void *ud, json_object *o) { pods_enqueue(ud, "DELETED", o); }

/* A node has work at once (a pod event: its pod manager's, split): moved to the front of the
 * heap, or due again as soon as the step it runs returns. */
static void node_kick(struct kite_sim *s, uint32_t i, bool pods, int64_t now) {
    uint32_t t = task_of(i, pods && s->split ? STEP_PODS : STEP_AGENT);
    struct sim_step *st = step_of(s, t);
    if (st->running) {
        st->kick = true;
    } else if (st->heap_pos != NO_POS && st->due > now) {
        heap_remove(s, t);
        st->due = now;
        heap_push(s, t);
    }
}

static void pods_drain(struct kite_sim *s) {
    uint64_t v;
    ssize_t rd = read(s->ev_fd, &v, sizeof v);
    (void)rd;
    pthread_mutex_lock(&s->ev_lock);
    struct pod_ev *q = TAKE_PTR(s->evq);
    size_t n = s->n_evq;
    s->n_evq = s->cap_evq = 0;
    pthread_mutex_unlock(&s->ev_lock);
    int64_t now = mono();
    for (size_t k = 0; k < n; k++) {
        struct sim_node *nd = &s->nodes[q[k].node];
        if (!q[k].type) { /* a Node watch event */
            if (nd->agent) {
                kite_agent_node_event(nd->agent, q[k].pod);
                node_kick(s, q[k].node, false, now);
            }
        } else if (nd->pods) { /* a node not running has no pods: a revived one lists them (node_pods_start) */
            kite_pods_pod_event(nd->pods, q[k].type, q[k].pod);
            node_kick(s, q[k].node, true, now);
        }
        json_object_put(q[k].pod);
    }
    free(q);
}

/* The node's pod manager on a fresh fake runtime (a restarted machine runs no container). The
 * pods already bound to it come from the informer's cache, read whole (O(pods)) only when the
 * node ran before: a node's first start has none (the scheduler binds to Ready nodes only). */
static void node_pods_start(struct kite_sim *s, uint32_t i, const char *name, bool again) {
    struct sim_node *n = &s->nodes[i];
    char version[32];
    snprintf(version, sizeof version, "1.7.%u", 10 + i % KITE_SIM_SHAPES);
    n->rt = kite_runtime_fake_new(version);
    const struct shape *sh = &s->shapes[i % KITE_SIM_SHAPES];
    kite_runtime_fake_set_images(n->rt, sh->imgs, sh->n_imgs);
    struct kite_pods_options po = {.client = n->client, .runtime = n->rt, .node_name = name, .component = "kite-sim",
                                   .root_dir = s->pods_root,
                                   .seed = ((uint64_t)i + 7) * 0x9e3779b97f4a7c15ull};
    if (kite_pods_new(&po, &n->pods) < 0) {
        kite_runtime_free(n->rt);
        n->rt = NULL;
        n->pods = NULL;
        return;
    }
    json_object *items = json_object_new_array();
    if (again) {
        size_t nk = 0;
        char **keys = kite_informer_keys(s->pods_inf, &nk);
        for (size_t k = 0; k < nk; k++) {
            json_object *o = kite_informer_get(s->pods_inf, keys[k]);
            if (o && kite_streq(kite_obj_str_at(o, "spec", "nodeName"), name)) json_object_array_add(items, o);
            else json_object_put(o);
            free(keys[k]);
        }
        free(keys);
    }
    kite_pods_pod_list(n->pods, items);
    json_object_put(items);
}

/* Shared mode over HTTP/2: the request goes as a stream of the lane's connection (opened first
 * if it is not), the lane parks until the stream closes or the request's deadline passes. */
static int h2_request(struct kite_sim *s, struct sim_client *c, const char *method, const char *path,
                      const char *content_type, const char *body, size_t body_len, struct kite_response *ret) {
    struct lane *l = s->cur;
    if (!l) return -EINVAL;
    struct h2c *hc = s->h2[(unsigned)(l - s->lanes) % s->nh2];
    int64_t deadline = mono() / KITE_NS_PER_MS + SIM_REQUEST_TIMEOUT_MS;
    while (!kite_sim_h2c_is_open(hc)) {
        if (kite_sim_h2c_is_opening(hc)) { /* another lane handshakes: wait for it */
            if (mono() / KITE_NS_PER_MS >= deadline) return -ETIMEDOUT;
            lane_sleep(s, mono() / KITE_NS_PER_MS + 5);
            continue;
        }
        int r = kite_sim_h2c_open(hc, deadline);
        if (r == -EPROTONOSUPPORT) {
            static bool told;
            if (!told) log_warn(SIM_LOG, "the server does not speak HTTP/2 (ALPN h2): run kite sim with --http2=false");
            told = true;
        }
        if (r < 0) return r;
    }
    char name[128], user[160];
    kite_sim_node_name(s, c->node, name, sizeof name);
    memcpy(user, "system:node:", 12);
    memcpy(user + 12, name, strlen(name) + 1); /* name < 128 bytes, user 160 */
    const struct h2c_header hdr[] = {{"impersonate-user", user}, {"impersonate-group", "system:nodes"}};
    struct h2c_req *q = &l->req;
    kite_buf_reset(&q->resp);
    q->body = body;
    q->body_len = body ? body_len : 0;
    int r = kite_sim_h2c_submit(hc, q, method, path, content_type, hdr, KITE_ARRAY_SIZE(hdr));
    if (r < 0) return r;
    atomic_fetch_add(&c->base.bytes_sent, strlen(method) + strlen(path) + q->body_len);
    l->h2wait = true;
    l->fd = -1;
    l->deadline_ms = deadline;
    kite_fiber_switch(&l->fib, &s->loop_fib);
    s->cur = l;
    l->h2wait = false;
    if (!q->done) { /* the deadline */
        kite_sim_h2c_cancel(hc, q);
        kite_buf_reset(&q->resp);
        return -ETIMEDOUT;
    }
    if (q->result < 0) {
        kite_buf_reset(&q->resp);
        return q->result;
    }
    ret->status = q->status;
    ret->body = kite_buf_detach(&q->resp, &ret->len);
    return 0;
}

/* An HTTP/2 stream closed (called from inside h2c_event, h2c_flush, h2c_close): its lane is
 * resumed by the loop. */
static void h2_done(struct h2c_req *q, void *ud) {
    struct kite_sim *s = ud;
    struct lane *l = (struct lane *)((char *)q - offsetof(struct lane, req));
    if (l->h2ready) return;
    l->h2ready = true;
    s->ready[s->nready++] = (uint32_t)(l - s->lanes);
}

static int simc_request(struct kite_client *base, const char *method, const char *path, const char *content_type,
                        const char *body, size_t body_len, struct kite_response *ret) {
    struct sim_client *c = (struct sim_client *)base;
    struct kite_sim *s = c->s;
    struct sim_node *n = &s->nodes[c->node];
    if (n->slow_ms && s->cur) lane_sleep(s, mono() / KITE_NS_PER_MS + n->slow_ms);
    atomic_fetch_add(&base->requests, 1);
    if (n->partitioned || n->dead) return -ENETUNREACH; /* nothing leaves the machine */
    if (s->h2) return h2_request(s, c, method, path, content_type, body, body_len, ret);
    struct kite_client *t = c->own;
    if (!t) {
        if (!s->cur) return -EINVAL;
        t = s->pool[s->cur - s->lanes];
        char name[128], hdr[256];
        kite_sim_node_name(s, c->node, name, sizeof name);
        snprintf(hdr, sizeof hdr, "Impersonate-User: system:node:%s\r\nImpersonate-Group: system:nodes\r\n", name);
        kite_client_set_extra_headers(t, hdr);
    }
    uint64_t sent = atomic_load(&t->bytes_sent);
    int r = t->ops->request(t, method, path, content_type, body, body_len, ret);
    atomic_fetch_add(&base->bytes_sent, atomic_load(&t->bytes_sent) - sent);
    return r;
}

static int simc_watch(struct kite_client *base, const char *path, kite_watch_fn fn, void *ud,
                      struct kite_cancel *cancel) {
    return -EOPNOTSUPP; /* simulated nodes watch nothing themselves (the loop feeds them) */
}

static void simc_reset(struct kite_client *base) {
    struct sim_client *c = (struct sim_client *)base;
    if (c->own) kite_client_reset_connections(c->own);
    /* over HTTP/2 a connection carries other nodes' streams: a lost one is dropped anyway */
    else if (c->s->cur && !c->s->h2) kite_client_reset_connections(c->s->pool[c->s->cur - c->s->lanes]);
}

static void simc_free(struct kite_client *base) {
    struct sim_client *c = (struct sim_client *)base;
    kite_client_free(c->own);
    free(c);
}

static const struct kite_client_ops simc_ops = {simc_request, simc_watch, simc_reset, simc_free, NULL};

/* Builds a node's agent and client (its own certificate, or a share of the lanes' connections).
 * Runs in a lane (minting is CPU only). */
static int node_start(struct kite_sim *s, uint32_t i) {
    struct sim_node *n = &s->nodes[i];
    char name[128];
    kite_sim_node_name(s, i, name, sizeof name);
    struct sim_client *c = kite_calloc(1, sizeof *c);
    c->base.ops = &simc_ops;
    c->s = s;
    c->node = i;
    int r;
    if (!s->pool && !s->h2) {
        _cleanup_free_ char *cert = NULL, *key = NULL;
        if ((r = s->o.mint(s->o.mint_ud, name, &cert, &key)) < 0) {
            free(c);
            return r;
        }
        struct kite_kubeconfig kc = s->kc;
        kc.token = NULL;
        kc.cert_pem = cert;
        kc.cert_len = strlen(cert);
        kc.key_pem = key;
        kc.key_len = strlen(key);
        /* the agent's heartbeat timeout: min(nodeStatusUpdateFrequency, leaseDuration) */
        struct kite_client_options co = {.timeout_ms = 10000, .user_agent = "kite-sim"};
        if ((r = kite_client_new(&kc, &co, &c->own)) < 0) {
            free(c);
            return r;
        }
    }
    n->client = &c->base;
    if (s->o.pods_per_node) node_pods_start(s, i, name, n->ran);
    struct kite_agent_config *cfg = &s->cfg[s->ncfg > 1 ? i % s->ncfg : 0];
    cfg->node_name = name; /* copied by kite_agent_new */
    struct kite_agent_options ao = {.config = cfg, .client = n->client, .status_source = &node_status, .status_ud = n,
                                    .seed = ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ull};
    _cleanup_free_ char *err = NULL;
    r = kite_agent_new(&ao, &n->agent, &err);
    cfg->node_name = NULL;
    if (r < 0) {
        kite_pods_free(n->pods);
        kite_runtime_free(n->rt);
        n->pods = NULL;
        n->rt = NULL;
        kite_client_free(n->client);
        n->client = NULL;
        return r;
    }
    n->ran = true;
    s->started++;
    return 0;
}

static void node_stop(struct kite_sim *s, uint32_t i) {
    struct sim_node *n = &s->nodes[i];
    if (n->agent) {
        struct kite_agent_stats st;
        kite_agent_get_stats(n->agent, &st);
        s->renewals += st.lease_renewals;
        s->patches += st.status_patches;
        s->registrations += st.registrations;
        s->requests += st.requests;
        s->started--;
    }
    kite_agent_free(n->agent);
    kite_pods_free(n->pods);
    kite_runtime_free(n->rt);
    kite_client_free(n->client);
    n->agent = NULL;
    n->pods = NULL;
    n->rt = NULL;
    n->client = NULL;
}

/* ---- lanes ---- */

static int lane_wait(int fd, short events, int64_t deadline_ms, void *ud) {
    struct kite_sim *s = ud;
    struct lane *l = s->cur;
    struct epoll_event ev = {.events = (events & POLLOUT ? EPOLLOUT : 0) | (events & POLLIN ? EPOLLIN : 0),
                             .data.ptr = l};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) return -errno;
    l->fd = fd;
    l->deadline_ms = deadline_ms;
    l->result = 0;
    kite_fiber_switch(&l->fib, &s->loop_fib);
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
    l->fd = -1;
    return l->result;
}

/* Parks the running lane until deadline_ms (monotonic ms). */
static void lane_sleep(struct kite_sim *s, int64_t deadline_ms) {
    struct lane *l = s->cur;
    l->sleeping = true;
    l->fd = -1;
    l->deadline_ms = deadline_ms;
    kite_fiber_switch(&l->fib, &s->loop_fib);
    l->sleeping = false;
    s->cur = l;
}

static void lane_main(struct kite_sim *s, struct lane *l) {
    struct sim_node *n = &s->nodes[l->node];
    int r = 0;
    if (l->step == STEP_PODS) {
        n->step[STEP_PODS].due = kite_pods_step(n->pods);
    } else if (!n->agent && (r = node_start(s, l->node)) < 0) {
        s->mint_errors++;
        char name[128];
        kite_sim_node_name(s, l->node, name, sizeof name);
        log_warn(SIM_LOG, "cannot start node %s: %s", name, strerror(-r));
        n->step[STEP_AGENT].due = mono() + 5 * KITE_NS_PER_SEC;
    } else {
        int64_t due = kite_agent_step(n->agent);
        if (n->pods && !s->split) due = KITE_MIN(due, kite_pods_step(n->pods));
        n->step[STEP_AGENT].due = due;
    }
    l->done = true;
}

/* A lane's fiber: each switch-in after a finished step runs the next node given it. */
static void lane_loop(void *arg) {
    struct lane *l = arg;
    for (;;) {
        struct kite_sim *s = sim_current;
        lane_main(s, l);
        kite_fiber_switch(&l->fib, &s->loop_fib);
    }
}

static void lane_resume(struct kite_sim *s, struct lane *l);

static void lane_start(struct kite_sim *s, struct lane *l, uint32_t t) {
    uint32_t i = t & ~POD_TASK;
    struct sim_node *n = &s->nodes[i];
    s->n_lane_free--; /* l is the top of the free stack (free_lane) */
    l->node = i;
    l->step = t & POD_TASK ? STEP_PODS : STEP_AGENT;
    l->starting = l->step == STEP_AGENT && !n->agent;
    if (l->starting) s->lanes_starting++;
    l->done = false;
    l->fd = -1;
    n->step[l->step].running = true;
    if (l->step == STEP_PODS) s->lanes_pods++;
    s->lanes_busy++;
    lane_resume(s, l);
}

static void lane_finish(struct kite_sim *s, struct lane *l, int64_t started_due) {
    uint32_t i = l->node;
    struct sim_node *n = &s->nodes[i];
    l->node = NO_POS;
    s->lane_free[s->n_lane_free++] = (unsigned)(l - s->lanes);
    s->lanes_busy--;
    if (l->starting) s->lanes_starting--;
    l->starting = false;
    struct sim_step *st = &n->step[l->step], *pods = &n->step[STEP_PODS];
    st->running = false;
    if (l->step == STEP_PODS) s->lanes_pods--;
    if (n->dead) {
        if (!node_busy(n)) node_stop(s, i);
        return;
    }
    if (st->kick) {
        st->kick = false;
        st->due = mono();
    }
    heap_push(s, task_of(i, l->step));
    /* a node just started: its pod manager's steps from now on */
    if (l->step == STEP_AGENT && s->split && n->pods && !pods->running && pods->heap_pos == NO_POS) {
        pods->due = mono();
        heap_push(s, task_of(i, STEP_PODS));
    }
    (void)started_due;
}

/* per-lane: the due time of the step it runs and the node's renewals before it */
struct lane_acct {
    int64_t due;
    uint64_t renewals;
};
static struct lane_acct *lane_accts;

static void lane_resume(struct kite_sim *s, struct lane *l) {
    s->cur = l;
    kite_fiber_switch(&s->loop_fib, &l->fib);
    s->cur = NULL;
    if (!l->done) return;
    struct lane_acct *a = &lane_accts[l - s->lanes];
    struct sim_node *n = &s->nodes[l->node];
    if (n->agent && l->step == STEP_AGENT) {
        struct kite_agent_stats st;
        kite_agent_get_stats(n->agent, &st);
        if (st.lease_renewals > a->renewals) {
            int64_t lag = mono() - a->due;
            if (lag < 0) lag = 0;
            unsigned b = bucket_of(lag);
            s->hist[b]++;
            s->hist_iv[b]++;
            if (lag > s->lag_max_ns) s->lag_max_ns = lag;
        }
    }
    lane_finish(s, l, a->due);
}

/* The ramp: nodes start one after the other at ramp_per_s, which also spreads their renewals over
 * the lease period as a real cluster's are. */
static int64_t start_due(struct kite_sim *s, uint32_t i) {
    return s->start0 + (s->o.ramp_per_s ? (int64_t)i * KITE_NS_PER_SEC / s->o.ramp_per_s : 0);
}

/* The lane the next start takes (lane_start takes it off the free stack), or NULL. */
static struct lane *free_lane(struct kite_sim *s) {
    return s->n_lane_free ? &s->lanes[s->lane_free[s->n_lane_free - 1]] : NULL;
}

static void run_node(struct kite_sim *s, struct lane *l, uint32_t t) {
    struct lane_acct *a = &lane_accts[l - s->lanes];
    uint32_t i = t & ~POD_TASK;
    a->due = step_of(s, t)->due;
    a->renewals = 0;
    if (s->nodes[i].agent && !(t & POD_TASK)) {
        struct kite_agent_stats st;
        kite_agent_get_stats(s->nodes[i].agent, &st);
        a->renewals = st.lease_renewals;
    }
    lane_start(s, l, t);
}

/* ---- control ---- */

#define COMMANDS "kill, revive, flap, partition, heal, slow, stats, reset"

static void set_dead(struct kite_sim *s, uint32_t i, bool dead) {
    struct sim_node *n = &s->nodes[i];
    if (n->dead == dead) return;
    n->dead = dead;
    if (dead) {
        heap_remove(s, i);
        heap_remove(s, task_of(i, STEP_PODS));
        if (!node_busy(n)) node_stop(s, i); /* else when its steps return */
    } else if (!node_busy(n) && n->step[STEP_AGENT].heap_pos == NO_POS) {
        n->step[STEP_AGENT].due = mono();
        heap_push(s, i);
    }
}

static void flapping_add(struct kite_sim *s, uint32_t i) {
    for (size_t k = 0; k < s->nflapping; k++)
        if (s->flapping[k] == i) return;
    if (s->nflapping == s->cap_flapping) {
        s->cap_flapping = s->cap_flapping ? 2 * s->cap_flapping : 16;
        s->flapping = kite_realloc(s->flapping, s->cap_flapping * sizeof *s->flapping);
    }
    s->flapping[s->nflapping++] = i;
}

static void flapping_del(struct kite_sim *s, uint32_t i) {
    for (size_t k = 0; k < s->nflapping; k++)
        if (s->flapping[k] == i) {
            s->flapping[k] = s->flapping[--s->nflapping];
            return;
        }
}

/* Connections the simulator keeps: the lanes' in shared mode, else one per started node. */
static unsigned open_connections(struct kite_sim *s) {
    if (s->h2) {
        unsigned n = 0;
        for (unsigned k = 0; k < s->nh2; k++) n += kite_sim_h2c_is_open(s->h2[k]);
        return n;
    }
    return s->pool ? s->nlanes : s->started;
}

static void h2_stats(struct kite_sim *s, struct h2c_stats *ret) {
    *ret = (struct h2c_stats){0};
    for (unsigned k = 0; k < s->nh2; k++) {
        struct h2c_stats st;
        kite_sim_h2c_get_stats(s->h2[k], &st);
        ret->streams += st.streams;
        ret->opens += st.opens;
        ret->lost += st.lost;
        ret->records += st.records;
        ret->bytes_out += st.bytes_out;
    }
}

static void stats_json(struct kite_sim *s, struct kite_buf *b) {
    struct kite_sim_stats st;
    kite_sim_get_stats(s, &st);
    kite_buf_printf(b,
                    "{\"nodes\":%u,\"started\":%u,\"registered\":%u,\"ready\":%u,\"failing\":%u,\"dead\":%u,"
                    "\"partitioned\":%u,\"slow\":%u,"
                    "\"renewals\":%llu,\"statusPatches\":%llu,\"registrations\":%llu,\"requests\":%llu,"
                    "\"renewalP50Ms\":%.3f,\"renewalP99Ms\":%.3f,\"renewalMaxMs\":%.3f,\"rssKiB\":%ld,"
                    "\"rssStartKiB\":%ld,\"openConnections\":%u,",
                    st.nodes, st.started, st.registered, st.ready, st.failing, st.dead, st.partitioned, st.slow,
                    (unsigned long long)st.renewals, (unsigned long long)st.status_patches,
                    (unsigned long long)st.registrations, (unsigned long long)st.requests, st.renewal_p50_ms,
                    st.renewal_p99_ms, st.renewal_max_ms, rss_kb(), s->rss_start_kb, open_connections(s));
    struct h2c_stats h;
    h2_stats(s, &h);
    kite_buf_printf(b,
                    "\"protocol\":\"%s\",\"http2\":{\"streams\":%llu,\"connectionsOpened\":%llu,"
                    "\"connectionsLost\":%llu,\"records\":%llu,\"bytesOut\":%llu}}",
                    s->h2 ? "HTTP/2" : "HTTP/1.1", (unsigned long long)h.streams, (unsigned long long)h.opens,
                    (unsigned long long)h.lost, (unsigned long long)h.records, (unsigned long long)h.bytes_out);
}

char *kite_sim_control(struct kite_sim *s, const char *line) {
    _cleanup_free_ char *copy = kite_strdup(line);
    char *save = NULL, *cmd = strtok_r(copy, " \t\r\n", &save);
    if (!cmd) return kite_strdup("error: empty command (" COMMANDS ")");
    if (!strcmp(cmd, "stats")) {
        struct kite_buf b = {0};
        stats_json(s, &b);
        size_t len;
        return kite_buf_detach(&b, &len);
    }
    if (!strcmp(cmd, "reset")) {
        /* a benchmark's steady window starts here: the renewal latencies seen so far go */
        memset(s->hist, 0, sizeof s->hist);
        s->lag_max_ns = 0;
        return kite_strdup("ok 0");
    }
    long period = -1, slow_ms = -1;
    if (!strcmp(cmd, "flap")) {
        char *p = strtok_r(NULL, " \t\r\n", &save), *end = NULL;
        if (!p) return kite_strdup("error: flap SECONDS NAME...");
        period = strtol(p, &end, 10);
        if (*end || period < 0 || period > 86400) return kite_asprintf("error: flap: bad period \"%s\" (0..86400)", p);
    } else if (!strcmp(cmd, "slow")) {
        char *p = strtok_r(NULL, " \t\r\n", &save), *end = NULL;
        if (!p) return kite_strdup("error: slow MILLISECONDS NAME...");
        slow_ms = strtol(p, &end, 10);
        if (*end || slow_ms < 0 || slow_ms > KITE_SIM_MAX_SLOW_MS)
            return kite_asprintf("error: slow: bad delay \"%s\" (0..%d ms)", p, KITE_SIM_MAX_SLOW_MS);
    } else if (strcmp(cmd, "kill") && strcmp(cmd, "revive") && strcmp(cmd, "partition") && strcmp(cmd, "heal")) {
        return kite_asprintf("error: unknown command \"%s\" (" COMMANDS ")", cmd);
    }
    /* every name is checked before any node changes */
    size_t n = 0, cap = 16;
    uint32_t *idx = kite_calloc(cap, sizeof *idx);
    for (char *t; (t = strtok_r(NULL, " \t\r\n", &save));) {
        long i = name_index(s, t);
        if (i < 0) {
            free(idx);
            return kite_asprintf("error: no simulated node \"%s\"", t);
        }
        if (n == cap) idx = kite_realloc(idx, (cap *= 2) * sizeof *idx);
        idx[n++] = (uint32_t)i;
    }
    int64_t now = mono();
    for (size_t k = 0; k < n; k++) {
        struct sim_node *nd = &s->nodes[idx[k]];
        if (!strcmp(cmd, "kill")) {
            set_dead(s, idx[k], true);
        } else if (!strcmp(cmd, "revive")) {
            set_dead(s, idx[k], false);
        } else if (!strcmp(cmd, "partition")) {
            nd->partitioned = true;
            /* its kept-alive connection goes quiet as well: closed, not reused afterwards */
            if (nd->client && !node_busy(nd)) kite_client_reset_connections(nd->client);
        } else if (!strcmp(cmd, "heal")) {
            nd->partitioned = false;
        } else if (slow_ms >= 0) {
            nd->slow_ms = (uint32_t)slow_ms;
        } else if (period == 0) {
            nd->flap_next = 0;
            flapping_del(s, idx[k]);
            set_dead(s, idx[k], false);
        } else {
            nd->flap_period_s = (uint32_t)period;
            nd->flap_next = now + period * KITE_NS_PER_SEC;
            flapping_add(s, idx[k]);
            set_dead(s, idx[k], true);
        }
    }
    free(idx);
    return kite_asprintf("ok %zu", n);
}

static void control_accept(struct kite_sim *s) {
    int fd = accept4(s->ctl_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) return;
    /* one short line: read it with a bound on how long a client may take */
    struct kite_buf b = {0};
    int64_t deadline = mono() + KITE_NS_PER_SEC;
    char buf[4096];
    while (b.len < CONTROL_MAX_LINE && !memchr(b.p ? b.p : "", '\n', b.len)) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = (deadline - mono()) / KITE_NS_PER_MS;
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) break;
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0) break;
        kite_buf_append(&b, buf, (size_t)r);
    }
    kite_buf_putc(&b, 0);
    char *nl = strchr(b.p, '\n');
    if (nl) *nl = 0;
    _cleanup_free_ char *answer = kite_sim_control(s, b.p);
    kite_buf_release(&b);
    _cleanup_free_ char *out = kite_asprintf("%s\n", answer);
    ssize_t w = write(fd, out, strlen(out));
    (void)w;
    close(fd);
}

/* ---- the loop ---- */

void kite_sim_get_stats(struct kite_sim *s, struct kite_sim_stats *st) {
    *st = (struct kite_sim_stats){.nodes = s->o.nodes, .started = s->started, .renewals = s->renewals,
                                  .status_patches = s->patches, .registrations = s->registrations,
                                  .requests = s->requests};
    for (uint32_t i = 0; i < s->o.nodes; i++) {
        struct sim_node *n = &s->nodes[i];
        if (n->dead) st->dead++;
        if (n->partitioned) st->partitioned++;
        if (n->slow_ms) st->slow++;
        if (!n->agent) continue;
        struct kite_agent_stats as;
        kite_agent_get_stats(n->agent, &as);
        st->renewals += as.lease_renewals;
        st->status_patches += as.status_patches;
        st->registrations += as.registrations;
        st->requests += as.requests;
        if (kite_agent_registered(n->agent)) st->registered++;
        if (kite_agent_reported_ready(n->agent)) st->ready++;
        if (kite_agent_failing(n->agent)) st->failing++;
    }
    st->renewal_p50_ms = hist_quantile(s->hist, 0.50);
    st->renewal_p99_ms = hist_quantile(s->hist, 0.99);
    st->renewal_max_ms = (double)s->lag_max_ns / 1e6;
}

static void progress(struct kite_sim *s, int64_t now, int64_t *last, uint64_t *last_renewals) {
    struct kite_sim_stats st;
    kite_sim_get_stats(s, &st);
    double dt = (double)(now - *last) / 1e9;
    long rss = rss_kb();
    double per_node = st.started ? (double)(rss - s->rss_start_kb) / st.started : 0;
    fprintf(s->o.progress,
            "sim: %u/%u registered, %u Ready, %.1f renewals/s, renewal p99 %.1f ms (max %.1f), %u failing, "
            "%u dead, %u connections, RSS %ld MiB (%.1f KiB/node)\n",
            st.registered, st.nodes, st.ready, dt > 0 ? (double)(st.renewals - *last_renewals) / dt : 0,
            hist_quantile(s->hist_iv, 0.99), st.renewal_max_ms, st.failing, st.dead, open_connections(s), rss / 1024,
            per_node);
    fflush(s->o.progress);
    memset(s->hist_iv, 0, sizeof s->hist_iv);
    *last = now;
    *last_renewals = st.renewals;
}

int kite_sim_run(struct kite_sim *s, volatile sig_atomic_t *stop) {
    sim_current = s;
    kite_client_set_thread_waiter(lane_wait, s);
    int64_t every = s->o.progress_every_ns ? s->o.progress_every_ns : 2 * KITE_NS_PER_SEC;
    int64_t last_progress = mono(), stop_deadline = 0;
    uint64_t last_renewals = 0;
    struct epoll_event evs[64];
    for (;;) {
        int64_t now = mono();
        if (*stop && !stop_deadline) stop_deadline = now + 5 * KITE_NS_PER_SEC;
        if (stop_deadline && (!s->lanes_busy || now >= stop_deadline)) break;
        for (size_t k = 0; k < s->nflapping; k++) {
            struct sim_node *n = &s->nodes[s->flapping[k]];
            if (now < n->flap_next) continue;
            n->flap_next = now + (int64_t)n->flap_period_s * KITE_NS_PER_SEC;
            set_dead(s, s->flapping[k], !n->dead);
        }
        struct lane *l;
        while (!stop_deadline && s->heap.len && step_of(s, s->heap.v[0])->due <= now && (l = free_lane(s)))
            run_node(s, l, heap_pop(s, &s->heap));
        while (!stop_deadline && s->pheap.len && step_of(s, s->pheap.v[0])->due <= now &&
               s->lanes_pods < KITE_MAX(1, s->nlanes / 2) && (l = free_lane(s)))
            run_node(s, l, heap_pop(s, &s->pheap));
        while (!stop_deadline && s->next_start < s->o.nodes && start_due(s, s->next_start) <= now &&
               s->lanes_starting < KITE_MAX(1, s->nlanes / 2) && (l = free_lane(s))) {
            uint32_t i = s->next_start++;
            struct sim_node *n = &s->nodes[i];
            if (n->dead || n->agent || node_busy(n) || n->step[STEP_AGENT].heap_pos != NO_POS)
                continue; /* the control got to it */
            n->step[STEP_AGENT].due = now;
            run_node(s, l, i);
        }
        if (s->o.progress && now - last_progress >= every) progress(s, now, &last_progress, &last_renewals);
        /* the streams the lanes submitted this round leave together */
        for (unsigned k = 0; k < s->nh2; k++)
            if (kite_sim_h2c_dirty(s->h2[k])) kite_sim_h2c_flush(s->h2[k]);
        /* sleep until a node is due, a lane's deadline passes, a socket or the control socket */
        now = mono();
        int64_t wake = last_progress + every;
        if (s->heap.len && s->lanes_busy < s->nlanes) wake = KITE_MIN(wake, step_of(s, s->heap.v[0])->due);
        if (s->pheap.len && s->lanes_busy < s->nlanes && s->lanes_pods < KITE_MAX(1, s->nlanes / 2))
            wake = KITE_MIN(wake, step_of(s, s->pheap.v[0])->due);
        if (s->next_start < s->o.nodes && s->lanes_busy < s->nlanes && s->lanes_starting < KITE_MAX(1, s->nlanes / 2))
            wake = KITE_MIN(wake, start_due(s, s->next_start));
        for (size_t k = 0; k < s->nflapping; k++) wake = KITE_MIN(wake, s->nodes[s->flapping[k]].flap_next);
        for (unsigned k = 0; k < s->nlanes; k++)
            if (s->lanes[k].node != NO_POS && (s->lanes[k].fd >= 0 || s->lanes[k].sleeping || s->lanes[k].h2wait) &&
                s->lanes[k].deadline_ms >= 0)
                wake = KITE_MIN(wake, s->lanes[k].deadline_ms * KITE_NS_PER_MS);
        if (stop_deadline) wake = KITE_MIN(wake, now + 100 * KITE_NS_PER_MS);
        if (s->nready) wake = now; /* streams a flush failed */
        int timeout = wake <= now ? 0 : (int)KITE_MIN((wake - now + KITE_NS_PER_MS - 1) / KITE_NS_PER_MS, 1000);
        int ne = epoll_wait(s->epfd, evs, 64, timeout);
        if (ne < 0 && errno != EINTR) return -errno;
        for (int k = 0; k < ne; k++) {
            if (evs[k].data.ptr == NULL) {
                control_accept(s);
                continue;
            }
            if (evs[k].data.ptr == &s->ev_fd) {
                pods_drain(s);
                continue;
            }
            if (s->h2tags && (unsigned char *)evs[k].data.ptr >= s->h2tags &&
                (unsigned char *)evs[k].data.ptr < s->h2tags + s->nh2) {
                kite_sim_h2c_event(s->h2[(unsigned char *)evs[k].data.ptr - s->h2tags], evs[k].events);
                continue;
            }
            l = evs[k].data.ptr;
            if (l->node == NO_POS || l->fd < 0) continue; /* woken already this round */
            l->result = 0;
            l->fd = -2; /* taken: a second event for it this round is skipped */
            lane_resume(s, l);
        }
        /* the lanes whose streams closed (they may submit more: flushed at the end of the next round) */
        for (size_t k = 0; k < s->nready; k++) {
            l = &s->lanes[s->ready[k]];
            l->h2ready = false;
            if (l->node != NO_POS && l->h2wait && l->req.done) lane_resume(s, l);
        }
        s->nready = 0;
        int64_t now_ms = mono() / KITE_NS_PER_MS;
        for (unsigned k = 0; k < s->nlanes; k++) {
            l = &s->lanes[k];
            if (l->node == NO_POS || (l->fd < 0 && !l->sleeping && !l->h2wait) || l->deadline_ms < 0 ||
                now_ms < l->deadline_ms)
                continue;
            l->result = -ETIMEDOUT;
            lane_resume(s, l);
        }
    }
    if (s->o.progress) progress(s, mono(), &last_progress, &last_renewals);
    kite_client_set_thread_waiter(NULL, NULL);
    return 0;
}

int kite_sim_new(const struct kite_sim_options *o, struct kite_sim **ret, char **ret_err) {
    char *err = NULL;
    int r = 0;
    if (!o->nodes || o->nodes > KITE_SIM_MAX_NODES || o->zones > KITE_SIM_MAX_ZONES || !o->inflight ||
        o->inflight > KITE_SIM_MAX_INFLIGHT || o->connections > KITE_SIM_MAX_INFLIGHT || o->pods_per_node > KITE_SIM_MAX_PODS_PER_NODE || !o->mint || !o->machines_dir || !o->prefix || !*o->prefix) {
        if (ret_err) *ret_err = kite_strdup("bad simulator options");
        return -EINVAL;
    }
    if ((o->connections || o->pods_per_node) && !o->kc->token && !(o->kc->cert_pem && o->kc->key_pem)) {
        if (ret_err)
            *ret_err = kite_strdup("shared connections (impersonating the nodes) and the pod watch need the kubeconfig's "
                                   "credentials, allowed to impersonate users and groups and to watch pods (an admin's)");
        return -EINVAL;
    }
    struct kite_sim *s = kite_calloc(1, sizeof *s);
    s->o = *o;
    s->epfd = s->ctl_fd = -1;
    s->kc = *o->kc;
    s->ev_fd = -1;
    pthread_mutex_init(&s->ev_lock, NULL);
    kite_cancel_init(&s->watch_cancel);
    s->name_width = 5;
    for (unsigned v = o->nodes - 1; v >= 100000; v /= 10) s->name_width++;
    /* one agent configuration per zone: they differ only in the zone label */
    s->ncfg = o->zones ? o->zones : 1;
    s->cfg = kite_calloc(s->ncfg, sizeof *s->cfg);
    for (unsigned z = 0; z < s->ncfg; z++) {
        kite_agent_config_init(&s->cfg[z]);
        if (o->lease_duration_s) s->cfg[z].lease_duration_s = (int32_t)o->lease_duration_s;
        if (o->pods_per_node) s->cfg[z].ns.max_pods = (int)o->pods_per_node;
        json_object_object_add(s->cfg[z].labels, "kite.dev/simulated", json_object_new_string("true"));
        if (o->zones) {
            char zone[32];
            snprintf(zone, sizeof zone, "zone-%u", z);
            json_object_object_add(s->cfg[z].labels, "topology.kubernetes.io/zone", json_object_new_string(zone));
        }
    }
    if (mkdir(o->machines_dir, 0755) < 0 && errno != EEXIST) {
        r = -errno;
        err = kite_asprintf("creating %s: %s", o->machines_dir, strerror(errno));
        goto fail;
    }
    for (unsigned k = 0; k < KITE_SIM_SHAPES; k++)
        if ((r = make_shape(s, k, &err)) < 0) goto fail;
    s->nodes = kite_calloc(o->nodes, sizeof *s->nodes);
    s->heap.v = kite_calloc(o->nodes, sizeof *s->heap.v);
    s->pheap.v = kite_calloc(o->nodes, sizeof *s->pheap.v);
    s->start0 = mono();
    for (uint32_t i = 0; i < o->nodes; i++) {
        s->nodes[i].step[STEP_AGENT].heap_pos = s->nodes[i].step[STEP_PODS].heap_pos = NO_POS;
    }
    /* shared connections only: a node's own connection (one kite_client) carries one request at
     * a time, and its two steps would share it */
    s->split = o->pods_per_node && o->connections;
    s->nlanes = o->connections && !o->http2 ? o->connections : o->inflight;
    if (o->connections && o->http2) {
        /* shared mode over HTTP/2: the lanes' requests are streams of `connections` connections */
        struct kite_client_options co = {.timeout_ms = SIM_REQUEST_TIMEOUT_MS, .user_agent = "kite-sim"};
        if ((r = kite_client_new(&s->kc, &co, &s->h2dial)) < 0 || !kite_client_authority(s->h2dial) ||
            !kite_startswith(s->kc.server, "https://")) {
            r = -EINVAL;
            err = kite_strdup("--http2: cannot use the kubeconfig's server (https only), CA or credentials");
            goto fail;
        }
        s->nh2 = KITE_MIN(o->connections, s->nlanes);
        s->h2 = kite_calloc(s->nh2, sizeof *s->h2);
        s->h2tags = kite_calloc(s->nh2, 1);
        s->ready = kite_calloc(s->nlanes, sizeof *s->ready);
    } else if (o->connections) {
        /* shared mode: each lane's connection carries the kubeconfig's own credentials and
         * impersonates the node it runs */
        s->pool = kite_calloc(s->nlanes, sizeof *s->pool);
        struct kite_client_options co = {.timeout_ms = 10000, .user_agent = "kite-sim"};
        for (unsigned k = 0; k < s->nlanes; k++)
            if ((r = kite_client_new(&s->kc, &co, &s->pool[k])) < 0) {
                err = kite_strdup("cannot use the kubeconfig's server, CA or credentials");
                goto fail;
            }
    }
    s->lanes = kite_calloc(s->nlanes, sizeof *s->lanes);
    lane_accts = kite_calloc(s->nlanes, sizeof *lane_accts);
    s->lane_free = kite_calloc(s->nlanes, sizeof *s->lane_free);
    for (unsigned k = 0; k < s->nlanes; k++) {
        s->lanes[k].node = NO_POS;
        s->lanes[k].fd = -1;
        s->lanes[k].stack = mmap(NULL, KITE_SIM_STACK_BYTES, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (s->lanes[k].stack == MAP_FAILED) {
            s->lanes[k].stack = NULL;
            r = -ENOMEM;
            err = kite_strdup("cannot map the lanes' stacks");
            goto fail;
        }
        kite_fiber_init(&s->lanes[k].fib, s->lanes[k].stack, KITE_SIM_STACK_BYTES, lane_loop, &s->lanes[k]);
        s->lane_free[s->n_lane_free++] = s->nlanes - 1 - k; /* lane 0 on top: given first */
    }
    if ((s->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0) {
        r = -errno;
        err = kite_asprintf("epoll: %s", strerror(errno));
        goto fail;
    }
    if (o->control_path) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(o->control_path) >= sizeof sa.sun_path) {
            r = -ENAMETOOLONG;
            err = kite_asprintf("control socket path too long (%zu bytes at most): %s", sizeof sa.sun_path - 1,
                                o->control_path);
            goto fail;
        }
        strcpy(sa.sun_path, o->control_path);
        unlink(o->control_path);
        s->ctl_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s->ctl_fd < 0 || bind(s->ctl_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(s->ctl_fd, 16) < 0) {
            r = -errno;
            err = kite_asprintf("control socket %s: %s", o->control_path, strerror(errno));
            goto fail;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->ctl_fd, &ev);
    }
    s->ev_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->ev_fd < 0) {
        r = -errno;
        err = kite_asprintf("eventfd: %s", strerror(errno));
        goto fail;
    }
    struct epoll_event eev = {.events = EPOLLIN, .data.ptr = &s->ev_fd};
    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->ev_fd, &eev);
    for (unsigned k = 0; k < s->nh2; k++) {
        struct h2c_options ho = {.dialer = s->h2dial, .token = s->kc.token, .user_agent = "kite-sim",
                                 .epfd = s->epfd, .ep_ptr = &s->h2tags[k],
                                 .done = h2_done, .ud = s};
        s->h2[k] = kite_sim_h2c_new(&ho);
    }
    if (o->pods_per_node) {
        /* the pods' volumes are real (tmpfs mounts for token and secret volumes): in a mount
         * namespace of the simulator's own they go with it, whatever state its pods are in */
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
            r = -errno;
            err = kite_asprintf("--pods-per-node: a mount namespace of its own for the pods' volumes: %s (needs "
                                "root, before any thread)", strerror(errno));
            goto fail;
        }
        /* one watch on every pod, its events handed to the nodes they are bound to */
        s->pods_root = kite_strdup(o->machines_dir);
        struct kite_client_options co = {.timeout_ms = 30000, .user_agent = "kite-sim"};
        if (kite_client_new(&s->kc, &co, &s->pods_client) < 0) {
            r = -EINVAL;
            err = kite_strdup("cannot make the pod watch's client");
            goto fail;
        }
        struct kite_informer_options io = {.client = s->pods_client, .path = "/api/v1/pods", .name = "sim-pods",
                                           .n_handlers = 1};
        io.handlers[0] = (struct kite_informer_handlers){.add = on_pod_add, .update = on_pod_update,
                                                         .del = on_pod_del, .ud = s};
        if ((r = kite_informer_start(&io, &s->pods_inf)) < 0) {
            err = kite_asprintf("starting the pod watch: %s", strerror(-r));
            goto fail;
        }
    }
    if (o->kc->token || (o->kc->cert_pem && o->kc->key_pem)) {
        struct kite_client_options co = {.timeout_ms = 30000, .user_agent = "kite-sim"};
        if (kite_client_new(&s->kc, &co, &s->watch_client) == 0 &&
            pthread_create(&s->watch_thread, NULL, node_watch_thread, s) == 0)
            s->watching = true;
    }
    if (!s->watching)
        log_warn(SIM_LOG, "no Node watch (the kubeconfig has no credentials of its own): nodes will not correct "
                          "conditions others set");
    s->rss_start_kb = rss_kb();
    *ret = s;
    return 0;
fail:
    if (ret_err) *ret_err = err;
    else free(err);
    kite_sim_free(s);
    return r;
}

void kite_sim_free(struct kite_sim *s) {
    if (!s) return;
    kite_informer_stop(s->pods_inf); /* no handler runs after it */
    if (s->watching) {
        kite_cancel_fire(&s->watch_cancel);
        pthread_join(s->watch_thread, NULL);
    }
    kite_client_free(s->watch_client);
    kite_cancel_release(&s->watch_cancel);
    for (size_t k = 0; k < s->n_evq; k++) json_object_put(s->evq[k].pod);
    free(s->evq);
    kite_client_free(s->pods_client);
    free(s->pods_root);
    if (s->ev_fd >= 0) close(s->ev_fd);
    pthread_mutex_destroy(&s->ev_lock);
    for (uint32_t i = 0; s->nodes && i < s->o.nodes; i++)
        if (!node_busy(&s->nodes[i])) node_stop(s, i);
    /* a lane still parked (its request outlived the stop's grace) keeps its node: leaked with
     * the process's exit rather than freed under the coroutine */
    for (unsigned k = 0; s->h2 && k < s->nh2; k++) kite_sim_h2c_free(s->h2[k]);
    free(s->h2);
    free(s->h2tags);
    free(s->ready);
    kite_client_free(s->h2dial);
    for (unsigned k = 0; s->lanes && k < s->nlanes; k++) {
        kite_buf_release(&s->lanes[k].req.resp);
        if (s->lanes[k].stack) munmap(s->lanes[k].stack, KITE_SIM_STACK_BYTES);
    }
    free(s->lanes);
    for (unsigned k = 0; s->pool && k < s->nlanes; k++) kite_client_free(s->pool[k]);
    free(s->pool);
    free(lane_accts);
    free(s->lane_free);
    lane_accts = NULL;
    for (unsigned k = 0; k < KITE_SIM_SHAPES; k++) {
        for (size_t i = 0; i < s->shapes[k].n_imgs; i++) kite_image_release(&s->shapes[k].imgs[i]);
        free(s->shapes[k].imgs);
        free(s->shapes[k].sysroot);
        kite_ns_cache_free(s->shapes[k].cache);
        kite_runtime_free(s->shapes[k].rt);
    }
    for (unsigned z = 0; s->cfg && z < s->ncfg; z++) kite_agent_config_release(&s->cfg[z]);
    free(s->cfg);
    if (s->ctl_fd >= 0) {
        close(s->ctl_fd);
        if (s->o.control_path) unlink(s->o.control_path);
    }
    if (s->epfd >= 0) close(s->epfd);
    free(s->nodes);
    free(s->heap.v);
    free(s->pheap.v);
    free(s->flapping);
    free(s);
}
