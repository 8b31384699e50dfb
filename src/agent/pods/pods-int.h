/* Internals of the agent's pods, shared by its files and its unit tests. Everything here
 * runs on the thread calling kite_pods_step() except the fields under `lock`. */
#pragma once
#include <pthread.h>
#include <sys/types.h>

#include "agent/pods/pods.h"
#include "agent/pods/satoken.h"
#include "base/backoff.h"

#define PODS_LOG "pods"

/* One container of a pod (init or regular) as its worker tracks it. */
struct pod_ctr {
    char *name;
    bool init;
    bool ephemeral;        /* spec.ephemeralContainers: started once, never restarted, after c[n_main) */
    json_object *spec;     /* the container's spec (reference held) */
    char *id;              /* current container (latest attempt); NULL = none yet */
    char *prev_id;         /* the one before, kept for its lastState */
    struct kite_container_status st; /* runtime status of id (valid when have_st) */
    bool have_st;
    struct kite_container_status last; /* the previous attempt's terminated status */
    bool have_last;
    uint32_t restarts;
    char *wait_reason, *wait_message; /* waiting state when set */
    int64_t exit_seen;     /* mono time the worker saw the current attempt exit; 0 = not */
    int64_t bo_delay, bo_update; /* CrashLoopBackOff: current delay, mono time it was set */
    int64_t img_delay, img_next; /* image pull back-off */
    bool pulled_event;
    bool done;             /* init container completed (exit 0); a sidecar: started once */
    bool sidecar;          /* an init container with restartPolicy Always (runs beside the others) */
    char *tmsg_id;         /* the attempt whose termination message is in tmsg */
    char *tmsg;            /* its termination message (file, or logs on error); NULL = none */
    /* termination: the preStop hook runs on a thread of its own (hook_running), SIGTERM follows
     * it (term_sent) */
    bool stop_begun, hook_running, term_sent;
    /* probes (of the current attempt) */
    bool probe_ready;      /* the readiness probe's result */
    bool probe_started;    /* the startup probe succeeded */
    int64_t probe_kill_at; /* mono: SIGKILL after a failed liveness/startup probe's SIGTERM; 0 = none */
};

/* probes.c: the prober (liveness, readiness, startup; exec, httpGet, tcpSocket). */
enum probe_kind { PROBE_LIVENESS, PROBE_READINESS, PROBE_STARTUP };
#define PROBE_KINDS 3
struct probe_result {
    char *pod_uid, *ctr_name, *cid;
    enum probe_kind kind;
    bool success;  /* this run's result */
    bool changed;  /* the reported result changed to `success` (thresholds reached) */
    char *output;  /* why it failed; NULL on success */
};
void kite_pods_probe_result_release(struct probe_result *r);
struct kite_prober;
/* rt: exec probes (borrowed, thread-safe); wake(ud) is called when results are queued. */
struct kite_prober *kite_pods_prober_new(struct kite_clock *clock, struct kite_runtime *rt, void (*wake)(void *), void *ud);
void kite_pods_prober_free(struct kite_prober *p);
/* Registers a probe of a running container (idempotent per container id and kind; a changed
 * ip is taken). spec and ports are copied. start: mono time the container started. */
void kite_pods_prober_add(struct kite_prober *p, const char *pod_uid, const char *ctr_name, const char *cid,
                     enum probe_kind kind, json_object *spec, json_object *ports, const char *ip, int64_t start);
/* Forgets the probes of container cid, or of every container of pod_uid. */
void kite_pods_prober_remove(struct kite_prober *p, const char *cid, const char *pod_uid);
/* Runs every due probe; returns the mono time the next one is due (INT64_MAX = none). */
int64_t kite_pods_prober_step(struct kite_prober *p);
/* The results queued since the last call (a new array). */
void kite_pods_prober_take(struct kite_prober *p, struct probe_result **ret, size_t *ret_n);
int kite_pods_prober_start(struct kite_prober *p);
void kite_pods_prober_stop(struct kite_prober *p);
const char *kite_pods_probe_kind_name(enum probe_kind k); /* "Liveness" */
const char *kite_pods_probe_field(enum probe_kind k);     /* "livenessProbe" */

/* pods.c: the ephemeral containers of pod->obj's spec not yet in pod->c, added after the others
 * (the pods thread, while no worker has the pod). */
struct pod;
void kite_pods_ephemeral_sync(struct pod *pod);

enum pod_phase { PHASE_PENDING, PHASE_RUNNING, PHASE_SUCCEEDED, PHASE_FAILED };
const char *kite_pods_phase_name(enum pod_phase ph);

struct pod {
    char *uid, *ns, *name;
    json_object *obj;      /* latest object from the API (reference); NULL before any */
    bool in_api;           /* false once deleted from the API (or absent from a list) */
    bool deleting;         /* metadata.deletionTimestamp set */
    int64_t grace_s;       /* grace period of the stop */
    char *sandbox_id;
    char *sandbox_ip;
    char *old_sandbox_id; /* the sandbox before (its holder ended): its containers' records */
    bool volumes_ready;    /* every volume set up */
    bool volumes_polled;   /* an object of its volumes was read by GET, not watched: resync it */
    int64_t token_refresh_at; /* wall: a projected token of its volumes is due for a refresh (0: none) */
    struct pod_ctr *c;
    size_t nc, n_init;
    size_t n_main;         /* c[0..n_main): init and regular containers; then the ephemeral ones */
    bool admitted, rejected;
    char *reject_reason, *reject_message;
    bool deadline_exceeded; /* activeDeadlineSeconds passed: Failed, DeadlineExceeded */
    bool finished;         /* the API already had a terminal phase when first seen */
    int64_t start_wall;    /* startTime */
    /* termination */
    bool stopping;         /* SIGTERM sent */
    int64_t stop_at;       /* mono: when SIGTERM was sent */
    int64_t kill_at;       /* mono: SIGKILL after the grace period (from stop_at; shortened as grace_s is) */
    int64_t kill_floor;    /* mono: not before (a preStop hook ended: KITE_PODS_HOOK_MIN_GRACE_S after it) */
    bool killed;           /* every container and the sandbox stopped */
    bool delete_sent;
    bool removed;          /* containers and sandbox removed (pods gone from the API) */
    char *hung_op;         /* a runtime call of this pod that ran out of time */
    char *host_ip;         /* the node's address, copied in by the pods thread before a sync */
    /* worker scheduling. While busy, a worker thread owns every field of the pod but these
     * three and uid, ns, name, obj (which only the pods thread changes, never while busy). */
    int64_t next_sync;     /* mono; 0 = none */
    bool dirty;            /* pods thread: sync (again) */
    bool busy;             /* pods thread: a worker has the pod */
    bool holds;            /* pods thread: counts against allocatable (as of its last sync) */
    /* status manager */
    json_object *status;   /* latest computed status (owned) */
    uint64_t version, acked_version;
    json_object *acked;    /* status the server acknowledged */
    int64_t next_patch;
    struct kite_backoff patch_bo;
};

/* The event recorder (client-go's EventCorrelator: spam filter, aggregation, dedup). */
struct ev_entry {
    char *key;         /* everything incl. message */
    char *name, *ns;   /* the Event object */
    int32_t count;
    char *first_ts;
    int64_t used;      /* LRU tick */
};
struct ev_bucket {
    char *key;         /* source + involved object */
    double tokens;
    int64_t last;      /* mono of the last refill */
};
struct ev_agg {
    char *key;         /* similar key: message left out */
    char **msgs;
    size_t n_msgs;
    int64_t first;     /* mono of the window's start */
};
struct kite_recorder {
    pthread_mutex_t lock; /* pod workers record at once; held over the post, so an Event's
                           * name and count stay in step with what the server has */
    struct kite_client *client;
    struct kite_clock *clock;
    char *component, *host;
    struct ev_entry *e;
    size_t n_e;
    struct ev_bucket *b;
    size_t n_b;
    struct ev_agg *a;
    size_t n_a;
    int64_t tick;
    uint64_t posted, patched, dropped; /* counters for tests */
};
void kite_recorder_init(struct kite_recorder *r, struct kite_client *c, struct kite_clock *clock, const char *component,
                        const char *host);
void kite_recorder_release(struct kite_recorder *r);
/* Records an event about a pod (obj: its API object, borrowed; field_path may be NULL). */
void kite_recorder_pod_event(struct kite_recorder *r, json_object *obj, const char *field_path, const char *type,
                             const char *reason, const char *message);

struct pod_event {
    char *type;
    json_object *obj; /* pod; NULL = a list follows in items */
    json_object *items;
};

struct kite_pods {
    struct kite_client *client;
    struct kite_runtime *rt;
    struct kite_clock *clock;
    char *node_name;
    char *rt_prefix;       /* "kite-runc://" */
    uint64_t rng;
    struct kite_recorder rec;

    /* shared with the watch thread (under lock) */
    pthread_mutex_t lock;
    struct pod_event *q;
    size_t n_q;
    json_object *node_status;
    bool stopping;
    int wake_fd;           /* eventfd: pod events queued, a sync done, or stop */
    pthread_t thread, watch_thread;
    /* the pod workers (KITE_PODS_WORKERS threads; none in unit tests: syncs run inline) */
    pthread_t *workers;
    size_t n_workers;
    pthread_cond_t work_cv;
    struct pod **todo, **done; /* under lock: pods to sync, pods synced */
    size_t n_todo, n_done;
    bool threads;
    struct kite_cancel watch_cancel;
    struct log_pod **logs;  /* logindex.c: where each container's log is */
    size_t n_logs;
    void (*log_hook)(void *ud);
    void *log_hook_ud;

    /* pods thread */
    struct pod **pods;
    size_t n_pods;
    size_t n_busy;              /* pods a worker has */
    struct pod_event *deferred; /* events held until their pod's sync is done (in order) */
    size_t n_deferred;
    bool list_held;             /* a list is among them: no new syncs until the workers are done */
    struct probe_result *held_probes; /* results held for the same reason */
    size_t n_held_probes;
    /* preStop hooks (worker.c): each runs on a thread of its own; finished ones are queued under
     * lock (hook_done), applied by the pods thread (held while their pod is busy) */
    struct hook_done *hook_done, *held_hooks;
    size_t n_hook_done, n_held_hooks;
    size_t n_hooks;        /* under lock: hook threads running */
    pthread_cond_t hooks_cv;
    bool listed;           /* a full list arrived: unknown sandboxes may be removed */
    bool orphans_done;
    bool recovered;        /* the runtime's sandboxes were read */
    struct kite_sandbox_status *rec_sb; /* sandboxes found at start, not yet claimed */
    size_t n_rec_sb;
    int64_t next_relist, next_resync;
    int64_t alloc_cpu_m, alloc_mem_m, alloc_pods_m; /* milli-units; < 0 = unknown */
    char *host_ip;
    bool node_known;       /* the node's status arrived: pods may be admitted */
    char *root_dir;        /* the agent's root dir: pods/<uid>/volumes; NULL = no volumes */
    bool seccomp_default;  /* RuntimeDefault for containers that name no seccomp profile */
    char *unsafe_sysctls;  /* --allowed-unsafe-sysctls, normalized, comma-separated; NULL = none */
    bool apparmor;         /* the kernel enforces AppArmor (/sys/module/apparmor/parameters/enabled) */
    char *cluster_dns, *cluster_domain; /* NULL = none, cluster.local */
    int64_t backoff_base_ns; /* first delay of the restart and pull back-offs (KITE_PODS_BACKOFF_MIN_NS) */
    struct kite_prober *prober;
    struct pods_vobjs *vobjs; /* apivolumes.c */
    struct kite_satokens *satokens; /* projected ServiceAccount tokens (satoken.c) */
};

/* status.c: the pod's status as the kubelet generates it; prev (borrowed, may be NULL) gives
 * the lastTransitionTimes to keep. A new object. */
json_object *kite_pods_build_status(struct kite_pods *p, struct pod *pod, json_object *prev, int64_t now_wall);
enum pod_phase kite_pods_compute_phase(struct pod *pod);
/* Whether the pod's requests count against allocatable (pods thread; a busy pod's as of the
 * start of its sync). */
bool kite_pods_holds_resources(const struct pod *pod);
const char *kite_pods_restart_policy(struct pod *pod);
/* QoS class of a pod spec (Guaranteed, Burstable, BestEffort). */
const char *kite_pods_qos_class(json_object *spec);
/* Sets pod->status from the current state; bumps the version when it changed (the terminal
 * phase is never moved back). */
void kite_pods_status_update(struct kite_pods *p, struct pod *pod);
bool kite_pods_status_diverged(json_object *acked, json_object *server);
json_object *kite_pods_status_patch(struct pod *pod);
/* Sends the pod's status when it changed since the server's acknowledgement and no retry is
 * pending (from the pods thread, or from the worker that has the pod). */
void kite_pods_status_send(struct kite_pods *p, struct pod *pod, int64_t now);
/* Sends due status patches and final deletes. */
void kite_pods_status_sync(struct kite_pods *p, int64_t now);

/* volumes.c: emptyDir, hostPath and the API volumes (apivolumes.c). setup is idempotent (every sync before containers start);
 * on failure *ret_volume and *ret_err name the volume and the reason. mounts: the container's
 * volumeMounts as bind mounts (paths owned by *ret_paths, free with kite_strv_free(paths, n)).
 * teardown removes the pod's directory (tmpfs unmounted first). */
int kite_pods_volumes_setup(struct kite_pods *p, struct pod *pod, char **ret_volume, char **ret_err);
int kite_pods_volumes_mounts(struct kite_pods *p, struct pod *pod, json_object *ctr, struct kite_mount **ret,
                        size_t *ret_n, char ***ret_paths, char **ret_err);
int kite_pods_volumes_teardown(struct kite_pods *p, const char *uid);
void kite_pods_volumes_remove_orphans(struct kite_pods *p);
char *kite_pods_pod_dir(struct kite_pods *p, const char *uid);

/* atomicwriter.c: the kubelet's atomic writer. A payload is a set of files (relative, clean
 * paths; a later add of the same path replaces it). pods_atomic_write writes it into dir
 * through a timestamped directory and the ..data symlink: 1 when written, 0 when dir already
 * held it, < 0 with *ret_err. pods_payload_path_clean: upstream's path checks on the path
 * cleaned (a new string), NULL with *ret_err. */
struct pods_file {
    char *path, *data; /* data is NUL-terminated past len */
    size_t len;
    mode_t mode;
};
struct pods_payload {
    struct pods_file *f;
    size_t n, bytes;
    bool has_gid;          /* the pod's fsGroup: files and directories get its group (dirs setgid) */
    gid_t gid;
};
void kite_pods_payload_add(struct pods_payload *pl, const char *path, const char *data, size_t len, mode_t mode);
void kite_pods_payload_release(struct pods_payload *pl);
char *kite_pods_payload_path_clean(const char *in, char **ret_err);
int kite_pods_atomic_write(const char *dir, const struct pods_payload *pl, int64_t now_wall, char **ret_err);

/* apivolumes.c: configMap, secret, downwardAPI and projected volumes. Their ConfigMaps and
 * Secrets are watched one by one (a list + watch of the name, as the kubelet's watch-based
 * manager and the Node authorizer allow) while a pod on the node refers to them; a change
 * marks those pods for a sync, which rewrites their files. */
#define KITE_PODS_VOLUME_MAX_BYTES (4u << 20) /* one volume's files together */
#define KITE_PODS_VOLUME_WATCHES_MAX 256      /* ConfigMaps and Secrets watched at once */
#define KITE_PODS_VOLUME_POLL_NS (60 * KITE_NS_PER_SEC) /* resync of a pod whose objects are read by GET */
struct pods_vobjs;
/* The volume's plugin directory name ("kubernetes.io~configmap"); *ret_tmpfs: kept in memory.
 * NULL when vol is none of these kinds. */
const char *kite_pods_api_volume_plugin(json_object *vol, bool *ret_tmpfs);
/* The volume's files for the pod (*ret_err: the kubelet's MountVolume.SetUp message). */
int kite_pods_api_volume_payload(struct kite_pods *p, struct pod *pod, json_object *vol, struct pods_payload *ret,
                            char **ret_err);
/* fieldpath.FormatMap: a downwardAPI file of labels or annotations (a new string). */
char *kite_pods_format_map(json_object *m);
void kite_pods_vobjs_init(struct kite_pods *p);
void kite_pods_vobjs_stop(struct kite_pods *p);  /* stops every watch (the workers are stopped) */
void kite_pods_vobjs_free(struct kite_pods *p);
void kite_pods_vobjs_forget(struct kite_pods *p, const char *uid); /* the pod's references go */
void kite_pods_vobjs_mark_changed(struct kite_pods *p); /* pods thread: pods whose objects changed get a sync */

/* env.c: field and object lookups shared with the volumes. pods_field_value: a fieldRef's
 * value; pods_find_ctr: a container's spec by name (NULL = none); pods_get_object: GET of a
 * ConfigMap or Secret (*ret a new reference, NULL when not found). */
int kite_pods_field_value(struct pod *pod, const char *path, char **ret, char **ret_err);
json_object *kite_pods_find_ctr(struct pod *pod, const char *name);
int kite_pods_get_object(struct kite_pods *p, const char *ns, bool secret, const char *name, json_object **ret,
                    char **ret_err);

/* env.c: a container's environment (see there). An ordered map of variables: */
struct pods_env {
    char **k, **v;
    size_t n;
};
void kite_pods_env_set(struct pods_env *e, const char *k, const char *v);
const char *kite_pods_env_get(const struct pods_env *e, const char *k, size_t len); /* NULL = unset */
void kite_pods_env_del(struct pods_env *e, const char *k);
void kite_pods_env_release(struct pods_env *e);
/* The kubelet's $(VAR) expansion: lookup(name) NULL = unknown, kept as written; $$ is $. A new
 * string. */
char *kite_pods_env_expand(const char *in, const char *(*lookup)(void *ud, const char *name, size_t len), void *ud);
bool kite_pods_env_name_valid(const char *s);
/* Adds a Service's link variables (FOO_SERVICE_HOST, FOO_PORT_80_TCP_ADDR...). */
void kite_pods_env_service(struct pods_env *e, json_object *svc);
/* A resourceFieldRef's value: resource "limits.cpu"..., divisor NULL = 1; unset limits are the
 * node's allocatable (milli-units, <= 0 = unknown). */
int kite_pods_env_resource_value(json_object *ctr, const char *resource, const char *divisor, int64_t alloc_cpu_m,
                            int64_t alloc_mem_m, char **ret, char **ret_err);
/* The container's variables into *ret (in the order given to the runtime); < 0 with *ret_err,
 * the kubelet's CreateContainerConfigError message, when a non-optional source is missing. */
int kite_pods_env_build(struct kite_pods *p, struct pod *pod, json_object *ctr, const char *hostname, struct pods_env *ret,
                   char **ret_err);
/* command or args expanded against env: a new vector of *ret_n strings. */
char **kite_pods_env_expand_argv(json_object *arr, const struct pods_env *env, size_t *ret_n);

/* etcfiles.c: the managed hosts file (node_hosts: a hostNetwork pod's, the node's hosts file)
 * and resolv.conf (dnsPolicy, dnsConfig; host_resolv: the node's) as text; pods_etc_mounts
 * writes them and /etc/hostname into the pod's directory and appends their bind mounts (paths
 * owned by *paths) for a container that does not mount those paths itself. */
char *kite_pods_hosts_content(const char *ip, const char *hostname, const char *domain, json_object *host_aliases,
                         const char *node_hosts);
char *kite_pods_resolv_content(json_object *spec, const char *ns, const char *cluster_dns, const char *cluster_domain,
                          const char *host_resolv);
int kite_pods_etc_mounts(struct kite_pods *p, struct pod *pod, json_object *ctr, const char *hostname,
                    struct kite_mount **mounts, size_t *n, char ***paths, char **ret_err);

/* worker.c: the probes of the pod's running containers registered, those of stopped ones
 * forgotten; and the prober's results applied (readiness, startup, liveness kills, events). */
void kite_pods_probes_sync(struct kite_pods *p, struct pod *pod);
void kite_pods_probe_results(struct kite_pods *p, int64_t now);
/* status.c: a container counts as started / ready (running, probes passed). */
bool kite_pods_ctr_started(struct pod_ctr *c);
bool kite_pods_ctr_ready(struct pod_ctr *c);
/* logindex.c: publishes the pod's log files (pods thread); forgets a pod; frees the index. */
void kite_pods_logs_publish(struct kite_pods *p, const struct pod *pod);
void kite_pods_logs_forget(struct kite_pods *p, const char *uid);
void kite_pods_logs_release(struct kite_pods *p);

/* worker.c: a finished preStop hook. */
struct hook_done {
    char *uid, *ctr, *error; /* error: NULL = the hook succeeded */
};
void kite_pods_hooks_apply(struct kite_pods *p);
/* A detached thread with a KITE_PODS_THREAD_STACK stack. 0 or -errno. */
int kite_pods_thread_spawn(void *(*fn)(void *), void *arg);
void kite_pods_hooks_wait(struct kite_pods *p);
void kite_pods_hooks_release(struct kite_pods *p);
/* The container's termination message (terminationMessagePath's file, or its log's tail under
 * FallbackToLogsOnError) once its attempt s exited; a new string or NULL. */
char *kite_pods_termination_message(struct kite_pods *p, struct pod *pod, struct pod_ctr *c,
                               const struct kite_container_status *s);
/* worker.c */
void kite_pods_worker_sync(struct kite_pods *p, struct pod *pod, int64_t now);
/* Refreshes the runtime status of the pod's containers; true when something changed. */
bool kite_pods_refresh(struct kite_pods *p, struct pod *pod);
void kite_pods_admit(struct kite_pods *p, struct pod *pod);
/* The kernel enforces AppArmor: the file (NULL = /sys/module/apparmor/parameters/enabled)
 * starts with 'Y', as runc's apparmor.IsEnabled. */
bool kite_pods_apparmor_enabled(const char *file);
/* The kubelet's AppArmor admission (pkg/security/apparmor): NULL when the pod asks for no
 * profile other than unconfined (securityContext.appArmorProfile of the pod or a container,
 * or the legacy container.apparmor.security.beta.kubernetes.io/ annotations), else why it
 * cannot be run (a new string). */
char *kite_pods_apparmor_refusal(json_object *pod, bool enabled);
void kite_agent_pod_free(struct pod *pod);
/* Small JSON helpers. */
json_object *kite_agent_pj(json_object *o, const char *path); /* dotted path */
const char *kite_agent_pjs(json_object *o, const char *path);  /* string or NULL */
