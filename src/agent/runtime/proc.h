/* Child processes with deadlines, for the runc backend (proc.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <spawn.h>
#include <sys/types.h>

/* A timed-out child given SIGTERM first gets this long before SIGKILL. */
#define RT_TERM_GRACE_NS (500 * INT64_C(1000000))

struct kite_agent_rt_run {
    const char *const *argv; /* argv[0] an absolute path */
    const char *const *env;  /* extra "K=V" entries, NULL-terminated; may be NULL */
    int pass_fd;             /* becomes fd 3 in the child; -1 = none */
    const char *cwd;         /* NULL = the caller's */
    bool discard_output;     /* stdout/stderr to /dev/null (daemons that keep them open) */
    bool term_first;         /* at the deadline SIGTERM, then SIGKILL */
    int64_t deadline;        /* monotonic ns */
    size_t out_max;          /* 0 = 64 KiB */
    /* results */
    char *out; /* NUL-terminated; free with rt_run_release */
    size_t out_len;
    bool truncated;
    int status; /* exit code, or 128+signal */
};

/* 0 when the child ran (its code in status), -ETIMEDOUT, or -errno from spawning. */
int kite_agent_rt_run(struct kite_agent_rt_run *c);
/* posix_spawn in a new session with a default signal mask (runc and conmon must see the signals
 * the agent blocks): 0 or -errno. */
int kite_agent_rt_spawn(pid_t *ret_pid, const char *path, const posix_spawn_file_actions_t *fa, char *const *argv, char *const *envp);
void kite_agent_rt_run_release(struct kite_agent_rt_run *c);
int kite_agent_rt_pidfd_open(pid_t pid);
int64_t kite_agent_rt_mono_ns(void);
int kite_agent_rt_wait_fd(int fd, int64_t deadline);
