/* The agent's pods: the pods bound to the node (list + watch), one worker state machine per
 * pod on the runtime (sandbox, init containers in order, containers, restart policy with the
 * kubelet's CrashLoopBackOff, image pull back-off, graceful stop), an event-driven PLEG (the
 * runtime's exit events plus a relist every 10 s), a status manager (versioned cache, PATCH
 * pods/status only on change, uid precondition, retries, resync, terminal phases never
 * reversed, the final grace-0 delete), an event recorder with client-go's correlator rules
 * and the node's admission of pods by resources.
 *
 * Threads: kite_pods_step() does everything on one thread (the pods thread, or a test); the
 * watch thread only queues pod events. Runtime calls are never long: each has a deadline and
 * a graceful stop is a signal followed by later steps, not a wait, so one slow pod does not
 * hold the others back longer than a call's deadline. */
#pragma once
#include <json-c/json.h>
#include "agent/runtime/runtime.h"
#include "base/clock.h"
#include "client/client.h"

#define KITE_PODS_RT_TIMEOUT_NS (10 * KITE_NS_PER_SEC)        /* one runtime call of a pod worker */
#define KITE_PODS_RELIST_NS (10 * KITE_NS_PER_SEC)            /* PLEG relist (safety net) */
#define KITE_PODS_POST_START_CHECK_NS KITE_NS_PER_SEC        /* a started container is looked at again */
#define KITE_PODS_STATUS_RESYNC_NS (10 * KITE_NS_PER_SEC)     /* status manager resync */
#define KITE_PODS_BACKOFF_MIN_NS (10 * KITE_NS_PER_SEC)       /* CrashLoopBackOff / image back-off */
#define KITE_PODS_BACKOFF_MAX_NS (300 * KITE_NS_PER_SEC)
#define KITE_PODS_BACKOFF_RESET_NS (600 * KITE_NS_PER_SEC)    /* no crash for 10 min: reset */
#define KITE_PODS_PULL_RECHECK_NS KITE_NS_PER_SEC                /* ErrImagePull -> ImagePullBackOff */
#define KITE_PODS_SYNC_ERROR_NS (10 * KITE_NS_PER_SEC)        /* retry after a failed runtime call */
#define KITE_PODS_DEFAULT_GRACE_S 30                          /* terminationGracePeriodSeconds */
#define KITE_PODS_MAX_PODS 1024                               /* pods tracked by one agent */
#define KITE_PODS_WORKERS 4                                   /* pods synced at once (worker threads) */
#define KITE_PODS_HOOK_MIN_GRACE_S 2      /* SIGTERM to SIGKILL after a preStop hook at least (the kubelet's) */
#define KITE_PODS_TERM_MSG_MAX 4096       /* bytes of terminationMessagePath kept (its end) */
#define KITE_PODS_TERM_MSG_POD_MAX 12288  /* ...and of all a pod's, shared evenly (each message's start) */
#define KITE_PODS_TERM_LOG_LINES 80       /* FallbackToLogsOnError: the log's last lines... */
#define KITE_PODS_TERM_LOG_BYTES 2048     /* ...and of them the last bytes */
#define KITE_PODS_THREAD_STACK (512 * 1024) /* stack of a hook or probe thread */
#define KITE_PODS_DNS_MAX_NAMESERVERS 3   /* resolv.conf nameservers kept (the resolver's MAXNS) */
#define KITE_PODS_DNS_MAX_SEARCHES 32     /* resolv.conf search domains kept (the kubelet's limit) */
#define KITE_PODS_HOST_FILE_MAX (1u << 20) /* bytes read of the node's /etc/hosts and resolv.conf */
#define KITE_PODS_EVENT_CACHE 4096                            /* client-go maxLruCacheEntries */
#define KITE_PODS_EVENT_BURST 25                              /* spam filter burst per object */
#define KITE_PODS_EVENT_REFILL_NS (300 * KITE_NS_PER_SEC)     /* one more event per 5 min */
#define KITE_PODS_EVENT_AGG_MAX 10                            /* similar events before aggregating */
#define KITE_PODS_EVENT_AGG_WINDOW_NS (600 * KITE_NS_PER_SEC)

struct kite_pods;

struct kite_pods_options {
    struct kite_client *client;   /* borrowed */
    struct kite_runtime *runtime; /* borrowed; only the pods thread uses it, or it is locked */
    struct kite_clock *clock;     /* NULL = real */
    const char *node_name;
    const char *component;        /* events' source.component; NULL = "kite-agent" */
    const char *root_dir;         /* pods' volumes under <root_dir>/pods/<uid>; NULL = none */
    const char *cluster_dns;      /* --cluster-dns: comma-separated nameservers; NULL = the host's */
    const char *cluster_domain;   /* --cluster-domain; NULL = cluster.local */
    uint64_t seed;
    int64_t backoff_base_ns;      /* first delay of the restart and pull back-offs; 0 = KITE_PODS_BACKOFF_MIN_NS */
    const char *allowed_unsafe_sysctls; /* --allowed-unsafe-sysctls: normalized names and NAME*
                                           patterns, comma-separated; NULL = the safe set alone */
    bool seccomp_default;         /* --seccomp-default: RuntimeDefault when no profile is named */
    const char *apparmor_enabled_file; /* NULL = /sys/module/apparmor/parameters/enabled */
};

/* Sysctls as the kubelet's allowlist sees them. A name with '.' separators (NormalizeName: a
 * name whose first separator is '/' has '/' and '.' swapped); a new string. */
char *kite_pods_sysctl_normalize(const char *name);
/* The namespace a sysctl (or a pattern's prefix) lives in, as the kubelet's GetNamespace:
 * KITE_SYSCTL_IPC (kernel.sem, kernel.shm*, kernel.msg*, fs.mqueue.*), KITE_SYSCTL_NET (net.*),
 * else KITE_SYSCTL_UNKNOWN. */
enum { KITE_SYSCTL_UNKNOWN, KITE_SYSCTL_IPC, KITE_SYSCTL_NET };
int kite_pods_sysctl_namespace(const char *name);
/* A name or NAME* pattern as the kubelet's IsValidSysctlPattern accepts it (normalized first). */
#define KITE_SYSCTL_PATTERN_RE "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*([a-z0-9]([-_a-z0-9]*[a-z0-9])?)?(\\*)?$"
bool kite_pods_sysctl_pattern_valid(const char *pattern);
/* The kubelet's sysctl admission for one (normalized) name: NULL when the safe set or the
 * allowed patterns (comma-separated, may be NULL) admit it, else the reason
 * (`"NAME" not allowlisted`, `"NAME" not allowed with host net enabled`), a new string. */
char *kite_pods_sysctl_refusal(const char *allowed, const char *name, bool host_net, bool host_ipc);

int kite_pods_new(const struct kite_pods_options *o, struct kite_pods **ret);
/* Accepts NULL. Stops threads first if started. */
void kite_pods_free(struct kite_pods *p);

/* Thread-safe inputs. A pod event from the API (type ADDED, MODIFIED, DELETED; pod borrowed). */
void kite_pods_pod_event(struct kite_pods *p, const char *type, json_object *pod);
/* The complete set of pods bound to the node (a list), borrowed array of pods: pods not in it
 * are gone from the API; the first call also allows the cleanup of containers of unknown pods. */
void kite_pods_pod_list(struct kite_pods *p, json_object *items);
/* The node's status as last acknowledged (borrowed): allocatable for admission, the
 * InternalIP for hostIP. No pod is admitted or run before the first one. */
void kite_pods_node_status(struct kite_pods *p, json_object *node_status);

/* Does all work that is due; returns the monotonic time it next has work. */
int64_t kite_pods_step(struct kite_pods *p);

/* The pods thread (steps, woken by pod events and runtime exits) and the pod watch thread. */
int kite_pods_start(struct kite_pods *p);
void kite_pods_stop(struct kite_pods *p);

/* The log file of a container for the log server (thread-safe): the current attempt's, or
 * the previous one's with previous. *ret_path (new string) and *ret_running (the attempt still
 * runs: a follower waits for more) set on 0. -ENOENT no such pod on the node, -ESRCH no such
 * container, -ENODATA no such attempt (yet). */
int kite_pods_log_lookup(struct kite_pods *p, const char *ns, const char *name, const char *container, bool previous,
                         char **ret_path, bool *ret_running);
/* The running container `container` of a pod on the node, for exec and attach (thread-safe):
 * 0 and *ret_id (new string); -ENOENT no such pod, -ESRCH no such container, -ENOTCONN its
 * current attempt is not running. container NULL: any running container of the pod (its
 * network namespace, for port-forward); -ENOTCONN when none runs. */
int kite_pods_container_lookup(struct kite_pods *p, const char *ns, const char *name, const char *container,
                               char **ret_id);
/* The runtime the pods run on (borrowed; safe from any thread). */
struct kite_runtime *kite_pods_runtime(struct kite_pods *p);
/* fn(ud) is called (from the pods thread, without locks held) whenever a container's log file or
 * running state changes; NULL unsubscribes. One subscriber. */
void kite_pods_log_subscribe(struct kite_pods *p, void (*fn)(void *ud), void *ud);

/* The running containers of the node's pods (thread-safe; for the resource metrics): a new
 * array, free with kite_pods_ctr_refs_free. started_ns: wall clock. */
struct kite_pods_ctr_ref {
    char *ns, *pod, *uid, *name, *id;
    int64_t started_ns;
};
int kite_pods_running_containers(struct kite_pods *p, struct kite_pods_ctr_ref **ret, size_t *ret_n);
void kite_pods_ctr_refs_free(struct kite_pods_ctr_ref *v, size_t n);

/* A runtime whose calls are serialized by a mutex, for sharing one runtime between the pods
 * thread and the node status. inner is borrowed. */
struct kite_runtime *kite_runtime_locked_new(struct kite_runtime *inner);
