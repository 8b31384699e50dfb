/* The runc runtime's parts (runc.c: runc calls, bundles, containers, the runtime's table;
 * runc-oci.c: the OCI config; runc-cgroup.c: cgroups; runc-exit.c: exit watching and events;
 * runc-sandbox.c: sandboxes and their network). Internal to src/agent/runtime/. */
#pragma once
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <termios.h>
#include <unistd.h>
extern char **environ;
#include "agent/images/images.h"
#include "agent/runtime/cgstats.h"
#include "agent/runtime/ipam.h"
#include "agent/runtime/net.h"
#include "agent/runtime/proc.h"
#include "agent/runtime/runtime.h"
#include "base/base.h"
#include "base/clock.h"
#include "json/obj.h"

extern char **environ;

/* How long after its process ended conmon may take to write the exit file. */
#define RC_EXIT_FILE_WAIT_NS (2 * KITE_NS_PER_SEC)
#define RC_META_MAX (64 * 1024)

struct watch {
    char *id;
    int pidfd;
    int64_t finished_ns; /* wall time the pidfd saw the exit; 0 = not yet */
};

struct runc_rt {
    struct kite_runtime rt;
    char *root, *runc, *conmon, *pause_bin, *cgroup_root;
    char *images, *state, *exits, *containers, *sandboxes, *logs, *sockets;
    char *version;
    int epfd, inofd;
    /* the pod network: sandboxes' addresses from cidr, their veths on bridge */
    char *bridge;
    struct kite_cidr cidr;
    struct kite_ipam *ipam;
    /* Calls run from several threads at once (the agent's pod workers): mu guards the
     * watches, the address allocator, the bridge and every meta.json write; it is never held
     * while a runc, conmon or copy child runs, so one pod's slow call does not hold another's. */
    pthread_mutex_t mu;
    struct watch *watches;
    size_t n_watches;
    struct kite_clock *clock;
};

struct oci_in {
    json_object *args, *env;
    const char *cwd, *hostname, *cgroup;
    bool readonly_root, host_network, host_pid, host_ipc;
    const char *join_net, *join_ipc, *join_uts; /* the sandbox's namespaces; NULL = new ones (a pause holder) */
    pid_t pid_ns_pid; /* 0 = a pid namespace of its own, else that process's */
    const struct kite_container_config *cfg;
    const struct kite_security_config *sec; /* NULL = cfg's */
    const char *pause_bin;
};


/* runc-cgroup.c */
int64_t kite_rc_cgroup_oom_kills(const char *cg);
void kite_rc_cgroup_remove(const char *cg);
bool kite_rc_cgroup_v2_memory(void);

/* runc-exit.c */
int kite_rc_events_fd(struct kite_runtime *rt);
int kite_rc_read_events(struct kite_runtime *rt, struct kite_container_event **ret, size_t *ret_n);
void kite_rc_record_exit(struct runc_rt *c, const char *id, json_object *meta, int64_t finished);
void kite_rc_unwatch(struct runc_rt *c, const char *id);
void kite_rc_watch_container(struct runc_rt *c, const char *id);
int64_t kite_rc_watch_finished(struct runc_rt *c, const char *id);

/* runc-oci.c */
json_object *kite_rc_oci_config(const struct oci_in *in);

/* runc-sandbox.c */
int kite_rc_list_sandboxes(struct kite_runtime *rt, int64_t timeout_ns, struct kite_sandbox_status **ret, size_t *ret_n);
int kite_rc_remove_sandbox(struct kite_runtime *rt, const char *id, int64_t timeout_ns);
int kite_rc_run_sandbox(struct kite_runtime *rt, const struct kite_sandbox_config *cfg, int64_t timeout_ns,
                        char **ret_id, char **ret_error);
int kite_rc_sandbox_status(struct kite_runtime *rt, const char *id, int64_t timeout_ns, struct kite_sandbox_status *ret);
int kite_rc_stop_sandbox(struct kite_runtime *rt, const char *id, int64_t timeout_ns);
/* The sandbox's namespaces for its containers to join (new strings; NULL = one it does not have
 * of its own) and its pause holder's pid (0 for a pinned sandbox). -ENOTCONN: no holder. */
int kite_rc_sandbox_join(struct runc_rt *c, const char *id, json_object *sb, char **ret_net, char **ret_ipc, char **ret_uts,
                         pid_t *ret_pause);
/* Whether its namespaces are there: pinned and not stopped, or its holder running. */
bool kite_rc_sandbox_ready(struct runc_rt *c, const char *id, json_object *sb);
bool kite_rc_sandbox_pinned(json_object *sb);

/* runc.c */
char *kite_rc_cdir(struct runc_rt *c, const char *id, const char *file);
pid_t kite_rc_container_pid(struct runc_rt *c, const char *id);
int kite_rc_create_bundle(struct runc_rt *c, const char *id, json_object *config, json_object *meta, const char *log_path,
                          const struct kite_container_config *cfg, int64_t deadline, char **ret_error);
int64_t kite_rc_deadline_of(int64_t timeout_ns);
void kite_rc_destroy_bundle(struct runc_rt *c, const char *id);
char **kite_rc_list_ids(struct runc_rt *c, size_t *ret_n);
char *kite_rc_new_id(void);
int64_t kite_rc_now_wall(struct runc_rt *c);
bool kite_rc_pid_alive(pid_t pid);
bool kite_rc_holder_alive(pid_t pid);
struct runc_rt *kite_rc_of(struct kite_runtime *rt);
int kite_rc_read_exit(struct runc_rt *c, const char *id, int *ret_code, int64_t *ret_mtime);
json_object *kite_rc_read_meta(struct runc_rt *c, const char *id);
json_object *kite_rc_read_sandbox(struct runc_rt *c, const char *id);
int kite_rc_remove_by_id(struct runc_rt *c, const char *id, int64_t deadline);
int kite_rc_runc(struct runc_rt *c, int64_t deadline, struct kite_agent_rt_run *r, const char *const *args);
int kite_rc_runc_simple(struct runc_rt *c, int64_t deadline, char **ret_error, const char *const *args);
int kite_rc_stop_by_id(struct runc_rt *c, const char *id, int64_t grace_ns, int64_t deadline);
int kite_rc_write_json(const char *path, json_object *o);
void kite_rc_write_meta(struct runc_rt *c, const char *id, json_object *meta);
void kite_rc_write_meta_locked(struct runc_rt *c, const char *id, json_object *meta);
