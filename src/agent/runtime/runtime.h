/* The agent's container-runtime interface, in the CRI's shape (DESIGN.md "Runtime"): version,
 * images, pod sandboxes, containers, exec and container events, so a CRI (gRPC) backend can sit
 * next to `runc` and `fake`. A runtime whose ops say `concurrent` takes calls from several
 * threads at once (calls on one container or sandbox still come one at a time); any other is
 * used from one thread at a time.
 *
 * Every call that may block takes timeout_ns (0 = KITE_RT_DEFAULT_TIMEOUT_NS) and returns
 * -ETIMEDOUT when it runs out rather than hanging: the runc backend runs each runc call as a
 * child it kills at the deadline.
 *
 * Not done yet (later steps of "pods run for real"): IPv6 pod addresses, NAT or routes off the
 * node for pod traffic (the pod network stays on this machine), image pulls from registries (images are imported from
 * OCI layout tarballs), AppArmor profiles, container stdin/tty/attach and port forwarding, log rotation, and an event for
 * exits that happened while no runtime instance was running (a restarted agent relists). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kite_runtime;
struct kite_usage;

/* Default bound of one runtime call. */
#define KITE_RT_DEFAULT_TIMEOUT_NS (30 * INT64_C(1000000000))
/* Output kept from an exec (stdout and stderr together); more is dropped, flagged truncated. */
#define KITE_RT_EXEC_OUTPUT_MAX (1024 * 1024)

/* One image as the runtime reports it. names and every names[i] are owned by the struct's
 * holder; free arrays with kite_images_free(). id is the image's manifest digest
 * ("sha256:..."), may be NULL in hand-made values. */
struct kite_image {
    char **names;
    size_t n_names;
    int64_t size_bytes;
    char *id;
    char *user; /* image_status only: the config's User (CRI's uid or username); NULL = none (root) */
};

/* A pod sandbox to run (CRI PodSandboxConfig, the parts kite uses). Strings are borrowed. */
struct kite_sandbox_config {
    const char *uid, *name, *ns;
    bool host_network;    /* share the host's network (and UTS) namespace */
    bool host_pid, host_ipc; /* the containers share the host's pid, ipc namespace (hostPID, hostIPC) */
    /* shareProcessNamespace: the containers share one pid namespace, held by a pause process;
     * without it (and for hostPID) the sandbox runs no process at all: the runtime holds its
     * network, IPC and UTS namespaces itself (runc: bind mounts under the sandbox's dir) */
    bool share_pid;
    const char *hostname; /* NULL = the pod name; ignored with host_network */
    const char *cgroup_parent; /* absolute; NULL = /kite/pod<uid> */
    const char *log_dir;  /* NULL = <root>/logs/<ns>_<name>_<uid> */
    const char *const *sysctls; /* "name=value", set in the sandbox's namespaces */
    size_t n_sysctls;
};

enum kite_sandbox_state { KITE_SANDBOX_READY, KITE_SANDBOX_NOTREADY };

struct kite_sandbox_status {
    char *id, *uid, *name, *ns, *log_dir;
    enum kite_sandbox_state state;
    bool host_network;
    int64_t created_ns; /* wall clock */
    char *ip;           /* the pod's address on the pod network; "" with host_network */
};

/* A bind mount into a container. */
struct kite_mount {
    const char *host_path, *container_path;
    bool read_only;
};

/* A container to create (CRI ContainerConfig, the parts kite uses). Strings are borrowed.
 * command replaces the image's entrypoint and args its cmd, as Kubernetes does (a command with
 * no args drops the image's cmd). Limits of 0 are unset. */
/* The securityContext as the runtime applies it (all zero: root, containerd's default
 * capabilities, masked paths, writable root). */
struct kite_security_config {
    bool has_uid, has_gid;
    uint32_t uid, gid; /* root (0) when not set */
    const uint32_t *groups; /* supplementalGroups and fsGroup */
    size_t n_groups;
    bool readonly_root;
    bool privileged;    /* every capability, no masked or read-only paths, /sys writable */
    bool no_new_privs;  /* allowPrivilegeEscalation: false */
    const char *const *cap_add, *const *cap_drop; /* "NET_ADMIN" or "CAP_NET_ADMIN"; "ALL" */
    size_t n_cap_add, n_cap_drop;
    bool proc_unmasked; /* procMount: Unmasked: no masked or read-only /proc paths */
    enum kite_seccomp { KITE_SECCOMP_UNCONFINED, KITE_SECCOMP_RUNTIME_DEFAULT, KITE_SECCOMP_LOCALHOST } seccomp;
    const char *seccomp_localhost; /* Localhost: the profile file (absolute) */
};

/* Sets process.user, the capabilities, noNewPrivileges, root.readonly and the masked and
 * read-only paths of an OCI spec (with its process, root, mounts and linux objects) as
 * containerd's CRI does for sec. */
struct json_object;
void kite_oci_apply_security(struct json_object *spec, const struct kite_security_config *sec);

/* Adds linux.seccomp to spec (its capabilities set) as containerd's CRI does for sec: nothing
 * when privileged or Unconfined; containerd's default profile for RuntimeDefault (an allow list,
 * widened by the capabilities the container holds; the rest fails with EPERM); for Localhost the
 * profile file, in the Docker/containerd format. 0, or -errno with *ret_error (a missing or bad
 * profile file). */
int kite_oci_apply_seccomp(struct json_object *spec, const struct kite_security_config *sec, char **ret_error);
/* containerd's default profile for spec's bounding capabilities, as linux.seccomp. */
struct json_object *kite_oci_default_seccomp(struct json_object *spec);

/* The process user as containerd's CRI resolves it against root (the image's unpacked root):
 * runAsUser, else the image's User ("uid", "name", "uid:gid", "name:group", names looked up in
 * the root's /etc/passwd and /etc/group, links resolved inside the root), else root; the group
 * runAsGroup, else the user's in /etc/passwd (0 when it lists none); the additional groups the
 * primary one, those /etc/group lists the user in and sec's, sorted. *out is sec with these
 * (has_uid and has_gid set); out->groups is *ret_groups, a new array the caller frees. 0, or
 * -ENOENT with *ret_error (a user or group name the root does not list). */
int kite_oci_resolve_user(const char *root, const char *image_user, const struct kite_security_config *sec,
                          struct kite_security_config *out, uint32_t **ret_groups, char **ret_error);

struct kite_container_config {
    const char *name;
    uint32_t attempt; /* restart count: names the log file <attempt>.log */
    const char *image;
    const char *const *command;
    size_t n_command;
    const char *const *args;
    size_t n_args;
    const char *const *env; /* "KEY=VALUE", after the image's env (same key: this one wins) */
    size_t n_env;
    const char *working_dir; /* NULL = the image's, else "/" */
    const struct kite_mount *mounts;
    size_t n_mounts;
    int64_t memory_limit_bytes;
    int64_t cpu_quota_us, cpu_period_us, cpu_shares;
    int64_t pids_limit;
    const char *log_path; /* relative to the sandbox's log dir; NULL = <name>/<attempt>.log */
    struct kite_security_config sec; /* the container's securityContext over the pod's */
    /* stdin: the container's stdin stays open for attach (conmon -i), closed when the first
     * attach ends with stdin_once; tty: its stdio is a terminal (conmon -t) */
    bool stdin_open, stdin_once, tty;
    /* a running container of the sandbox whose pid namespace this one joins (an ephemeral
     * container's targetContainerName); NULL = a pid namespace of its own */
    const char *pid_ns_of;
};

enum kite_container_state {
    KITE_CONTAINER_CREATED,
    KITE_CONTAINER_RUNNING,
    KITE_CONTAINER_EXITED,
    KITE_CONTAINER_UNKNOWN,
};

struct kite_container_status {
    char *id, *sandbox_id, *name, *image, *image_id, *log_path;
    uint32_t attempt;
    enum kite_container_state state;
    int pid;       /* while running */
    int exit_code; /* once exited: the code, or 128+signal */
    int signal;    /* the killing signal when exit_code > 128, else 0 */
    bool oom_killed;
    int64_t created_ns, started_ns, finished_ns; /* wall clock; 0 = not yet */
    char *reason;  /* "Completed", "Error", "OOMKilled", "ContainerLost" or NULL */
    char *message; /* NULL or a detail */
};

struct kite_exec_result {
    int exit_code;
    char *output; /* stdout and stderr interleaved, NUL-terminated; caller frees */
    size_t output_len;
    bool truncated;
};

/* A command started in a running container with its streams (kubectl exec; the CRI's Exec,
 * served by the agent itself). The process `pid` is the runtime's (runc exec in the
 * foreground), a child of the caller: its exit code is the command's (128+signal when
 * killed); wait for it with waitpid. Without a tty, in_fd/out_fd/err_fd are pipe ends (-1
 * when that stream was not asked for: the command gets /dev/null); with a tty, pty_fd is the
 * terminal's master for input, output and resize (TIOCSWINSZ) and the other three are -1.
 * cmd_pid_file is where the runtime wrote the command's own pid (kite_exec_session_kill). */
struct kite_exec_session {
    int pid, pidfd;
    int in_fd, out_fd, err_fd, pty_fd;
    char *cmd_pid_file;
};
/* Kills the command (SIGKILL to the command, then to the runtime's process) so a client that
 * left does not leave it running; the caller still reaps pid. */
void kite_exec_session_kill(struct kite_exec_session *s);
/* Closes the descriptors, removes the pid file, frees the strings (not the process). */
void kite_exec_session_release(struct kite_exec_session *s);

/* A container's process ended (CRI ContainerEventResponse CONTAINER_STOPPED_EVENT). */
struct kite_container_event {
    char *container_id, *sandbox_id;
    int exit_code;
    bool oom_killed;
    int64_t finished_ns;
};

struct kite_runtime_ops {
    const char *name; /* "runc", "fake" */
    bool concurrent;  /* calls may run from several threads at once (see the top) */
    /* *ret_name ("runc") and *ret_version ("1.1.5") are new strings the caller frees; set only
     * on success. 0 or -errno. */
    int (*version)(struct kite_runtime *rt, char **ret_name, char **ret_version);
    /* CRI Status' RuntimeReady: 0 when the runtime can run containers, else -errno with
     * *ret_reason (a CamelCase word) and *ret_message (caller frees both). Never calls out to
     * the runtime's processes, so a hung container cannot make it hang. NULL = always ready. */
    int (*status)(struct kite_runtime *rt, char **ret_reason, char **ret_message);

    /* Images. A new array (caller frees with kite_images_free); *ret may be NULL when *ret_n is
     * 0. 0 or -errno. */
    int (*list_images)(struct kite_runtime *rt, struct kite_image **ret, size_t *ret_n);
    /* One image by reference ("busybox" = "docker.io/library/busybox:latest"); *ret filled
     * (free with kite_image_release). -ENOENT when absent. */
    int (*image_status)(struct kite_runtime *rt, const char *name, struct kite_image *ret);
    /* Drops the name; the image's data goes with its last name. -ENOENT, -EBUSY (a container
     * uses it). */
    int (*remove_image)(struct kite_runtime *rt, const char *name);
    /* Imports an OCI image layout tarball, verifying every blob. *ret_error (may be NULL) gets
     * a message on failure; *ret_names (may be NULL) the names imported. */
    int (*import_image)(struct kite_runtime *rt, const char *tar_path, char ***ret_names, size_t *ret_n,
                        char **ret_error);

    /* Sandboxes. run: *ret_id a new string. stop kills the sandbox's containers and its holder;
     * remove (after stop or not) removes them all. status: -ENOENT when unknown. */
    int (*run_sandbox)(struct kite_runtime *rt, const struct kite_sandbox_config *cfg, int64_t timeout_ns,
                       char **ret_id, char **ret_error);
    int (*stop_sandbox)(struct kite_runtime *rt, const char *id, int64_t timeout_ns);
    int (*remove_sandbox)(struct kite_runtime *rt, const char *id, int64_t timeout_ns);
    int (*sandbox_status)(struct kite_runtime *rt, const char *id, int64_t timeout_ns,
                          struct kite_sandbox_status *ret);
    int (*list_sandboxes)(struct kite_runtime *rt, int64_t timeout_ns, struct kite_sandbox_status **ret,
                          size_t *ret_n);

    /* Containers. create: *ret_id a new string; -ENOENT (no such sandbox or image). A container
     * whose process cannot be created (no such executable...) is created all the same, as
     * containerd's: its start then fails with -ENOEXEC and *ret_error, and its status is exited,
     * code 128, reason "StartError", the error as message. stop: SIGTERM,
     * then SIGKILL after grace_ns; returns once the process is gone (0 also when it was not
     * running). remove stops first. list: sandbox_id NULL = all. */
    int (*create_container)(struct kite_runtime *rt, const char *sandbox_id, const struct kite_container_config *cfg,
                            int64_t timeout_ns, char **ret_id, char **ret_error);
    int (*start_container)(struct kite_runtime *rt, const char *id, int64_t timeout_ns, char **ret_error);
    int (*stop_container)(struct kite_runtime *rt, const char *id, int64_t grace_ns, int64_t timeout_ns);
    int (*remove_container)(struct kite_runtime *rt, const char *id, int64_t timeout_ns);
    int (*container_status)(struct kite_runtime *rt, const char *id, int64_t timeout_ns,
                            struct kite_container_status *ret);
    int (*list_containers)(struct kite_runtime *rt, const char *sandbox_id, int64_t timeout_ns,
                           struct kite_container_status **ret, size_t *ret_n);
    /* Runs argv in a running container and waits at most timeout_ns for it: -ETIMEDOUT then.
     * -ENOTCONN when the container is not running. */
    int (*exec_sync)(struct kite_runtime *rt, const char *id, const char *const *argv, size_t argc,
                     int64_t timeout_ns, struct kite_exec_result *ret);

    /* Starts argv in a running container with its streams (see struct kite_exec_session); -ENOENT
     * unknown container, -ENOTCONN not running, -ENOTSUP (NULL op: the runtime cannot). */
    int (*exec_start)(struct kite_runtime *rt, const char *id, const char *const *argv, size_t argc, bool tty,
                      bool want_in, bool want_out, bool want_err, struct kite_exec_session *ret, char **ret_error);
    /* The path of the container's attach socket (conmon's: SOCK_SEQPACKET, every packet one
     * byte naming the stream, 2 stdout or 3 stderr, then its bytes), a new string; -ENOENT,
     * -ENOTCONN not running, -ENOTSUP (NULL op). */
    int (*attach_socket)(struct kite_runtime *rt, const char *id, char **ret_path);

    /* Events: a file descriptor that polls readable when read_events() has something (owned by
     * the runtime), and read_events() which never blocks: a new array of the container exits
     * seen since the last call (free with kite_container_events_free). */
    int (*events_fd)(struct kite_runtime *rt);
    int (*read_events)(struct kite_runtime *rt, struct kite_container_event **ret, size_t *ret_n);

    /* A container's resource usage from its cgroup (CRI ContainerStats; cgstats.h): 0, -ENOENT
     * when the container or its cgroup is gone. Reads files only, never calls out to the
     * runtime's processes, and is thread-safe. NULL = the runtime does not measure. */
    int (*container_stats)(struct kite_runtime *rt, const char *id, struct kite_usage *ret);

    /* Releases the runtime (containers keep running); callers use kite_runtime_free(). */
    void (*free)(struct kite_runtime *rt);
};

/* Every runtime embeds this as its first member. */
struct kite_runtime {
    const struct kite_runtime_ops *ops;
};

/* Frees v[0..n) and v itself. NULL-safe. */
void kite_images_free(struct kite_image *v, size_t n);
void kite_image_release(struct kite_image *img);
/* Deep copy of n images (new array, caller frees with kite_images_free). NULL when n == 0. */
struct kite_image *kite_images_dup(const struct kite_image *v, size_t n);
void kite_sandbox_status_release(struct kite_sandbox_status *s);
void kite_sandbox_statuses_free(struct kite_sandbox_status *v, size_t n);
void kite_container_status_release(struct kite_container_status *s);
void kite_container_statuses_free(struct kite_container_status *v, size_t n);
void kite_container_events_free(struct kite_container_event *v, size_t n);
void kite_strv_free(char **v, size_t n);
const char *kite_container_state_name(enum kite_container_state s);

/* rt->ops->free(rt), NULL-safe. */
/* rt->ops->status, or ready when the runtime has none. */
int kite_runtime_status(struct kite_runtime *rt, char **ret_reason, char **ret_message);
void kite_runtime_free(struct kite_runtime *rt);

/* The runc runtime. Its state lives under root_dir: images/ (the image store), containers/<id>/
 * (OCI bundles), sandboxes/<id>/, runc/ (runc's --root), exits/ (conmon's exit files),
 * ipam/ (the pod addresses in use, one file each) and logs/. Every container, the pause holder
 * of a sandbox with share_pid included, is run by runc under its own conmon, so it outlives the
 * agent and its exit code is kept while the agent is down. A sandbox without share_pid has no
 * holder: its namespaces are bind-mounted on sandboxes/<id>/{net,ipc,uts} (CRI-O's pinns), which
 * outlive the agent as the mounts do. */
struct kite_runc_options {
    const char *root_dir;
    const char *runc_path;   /* NULL = found in PATH */
    const char *conmon_path; /* NULL = found in PATH */
    /* The pause holder of a share_pid sandbox: a static busybox bind-mounted into an empty
     * rootfs. NULL = /bin/busybox. */
    const char *pause_binary;
    const char *cgroup_root; /* NULL = /kite */
    /* The pod network (net.h): sandboxes not on the host's network get an address from
     * pod_cidr (IPv4; NULL = KITE_NET_POD_CIDR_DEFAULT, 10.88.0.0/16) on a veth plugged into
     * bridge (NULL = KITE_NET_BRIDGE_DEFAULT, kite0), whose address is the CIDR's first. */
    const char *pod_cidr;
    const char *bridge;
};
#define KITE_RT_CGROUP_ROOT "/kite"
#define KITE_RT_PAUSE_BINARY "/bin/busybox"
/* Creates dirs, finds runc and conmon, and recovers the containers already in root_dir (and
 * the addresses of their sandboxes, releasing those of sandboxes that are gone). 0 or -errno
 * (-ENOENT: runc or conmon not found; -EINVAL: a bad pod_cidr or bridge; *ret_error says). */
int kite_runtime_runc_new(const struct kite_runc_options *o, struct kite_runtime **ret, char **ret_error);

/* A fake runtime for tests and simulated nodes: name "fake", the given version (copied; NULL =
 * "0.0.0"), images settable, sandboxes and containers in memory (a sandbox not on the host's
 * network has the address 10.88.0.2, the next 10.88.0.3, ...), exits scripted. Aborts on
 * OOM, never NULL. Time comes from the real clock. */
struct kite_runtime *kite_runtime_fake_new(const char *version);
/* Replaces the fake's images with a deep copy of v[0..n) (borrowed). */
void kite_runtime_fake_set_images(struct kite_runtime *rt, const struct kite_image *v, size_t n);
/* Makes every call fail with err (0 = succeed again). */
void kite_runtime_fake_set_error(struct kite_runtime *rt, int err);
/* The fake's Status answer: ready, or not with reason and message (copied). */
void kite_runtime_fake_set_ready(struct kite_runtime *rt, bool ready, const char *reason, const char *message);
/* What happens to containers named `name` (created from now on); borrowed strings copied. */
struct kite_fake_script {
    int64_t start_delay_ns; /* start_container takes this long */
    int64_t exit_after_ns;  /* < 0: runs until stopped; else exits this long after start */
    int exit_code;
    bool oom;               /* the exit is an OOM kill (code 137) */
    bool ignore_sigterm;    /* stop waits the whole grace period, then kills (137) */
    bool no_exit_event;     /* the exit sends no event (as one that ended before runc's watch began) */
    const char *exec_output;
    int exec_exit_code;
};
void kite_runtime_fake_script(struct kite_runtime *rt, const char *name, const struct kite_fake_script *s);
/* What exec in the containers named `name` answers from now on (running ones included). */
void kite_runtime_fake_set_exec(struct kite_runtime *rt, const char *name, int exit_code, const char *output);
/* Makes the call named op ("start_container", "exec_sync", ...) hang until its timeout, then
 * fail with -ETIMEDOUT; NULL = no call hangs. */
void kite_runtime_fake_hang(struct kite_runtime *rt, const char *op);
