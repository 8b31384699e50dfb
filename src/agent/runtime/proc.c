/* Running a helper program (runc, conmon, cp) as a child with a deadline: its output is
 * captured, and at the deadline it is killed and the call returns -ETIMEDOUT, so a stuck runc
 * never hangs the agent. */
#include "agent/runtime/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "base/clock.h"

extern char **environ;

int kite_agent_rt_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int64_t kite_agent_rt_mono_ns(void) { return kite_now_mono(kite_clock_real()); }

/* Waits until fd polls readable or the deadline passes: 1, 0 on timeout, -errno. */
int kite_agent_rt_wait_fd(int fd, int64_t deadline) {
    for (;;) {
        int64_t left = deadline - kite_agent_rt_mono_ns();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)KITE_MIN(left / KITE_NS_PER_MS + 1, 1000));
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return -errno;
    }
}

int kite_agent_rt_spawn(pid_t *ret_pid, const char *path, const posix_spawn_file_actions_t *fa, char *const *argv, char *const *envp) {
    /* a default signal mask: runc and conmon must see the signals the agent blocks */
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSID);
    int r = posix_spawn(ret_pid, path, fa, &attr, argv, envp);
    posix_spawnattr_destroy(&attr);
    return -r;
}

int kite_agent_rt_run(struct kite_agent_rt_run *c) {
    int out[2] = {-1, -1};
    if (!c->discard_output && pipe2(out, O_CLOEXEC) < 0) return -errno;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (c->discard_output) {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    } else {
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, out[1], 2);
    }
    if (c->pass_fd >= 0) posix_spawn_file_actions_adddup2(&fa, c->pass_fd, 3);
    if (c->cwd) posix_spawn_file_actions_addchdir_np(&fa, c->cwd);
    posix_spawn_file_actions_addclosefrom_np(&fa, c->pass_fd >= 0 ? 4 : 3);
    /* the environment plus the extra entries */
    size_t n_env = 0, n_extra = 0;
    while (environ[n_env]) n_env++;
    while (c->env && c->env[n_extra]) n_extra++;
    char **envp = kite_calloc(n_env + n_extra + 1, sizeof(char *));
    memcpy(envp, environ, n_env * sizeof(char *));
    for (size_t i = 0; i < n_extra; i++) envp[n_env + i] = (char *)c->env[i];
    pid_t pid;
    int r = -kite_agent_rt_spawn(&pid, c->argv[0], &fa, (char *const *)c->argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    if (out[1] >= 0) close(out[1]);
    if (r != 0) {
        if (out[0] >= 0) close(out[0]);
        return -r;
    }
    int pidfd = kite_agent_rt_pidfd_open(pid);
    if (pidfd < 0) {
        r = -errno;
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        if (out[0] >= 0) close(out[0]);
        return r;
    }
    size_t cap = c->out_max ? c->out_max : 64 * 1024;
    c->out = kite_malloc(cap + 1);
    c->out_len = 0;
    c->truncated = false;
    bool exited = false, eof = out[0] < 0, timed_out = false;
    while (!exited || !eof) {
        int64_t left = c->deadline - kite_agent_rt_mono_ns();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p[2] = {{.fd = pidfd, .events = POLLIN}, {.fd = eof ? -1 : out[0], .events = POLLIN}};
        int pr = poll(p, 2, (int)KITE_MIN(left / KITE_NS_PER_MS + 1, 1000));
        if (pr < 0 && errno != EINTR) break;
        if (p[1].revents) {
            char buf[4096];
            ssize_t n = read(out[0], buf, sizeof buf);
            if (n <= 0) {
                eof = true;
            } else {
                size_t keep = KITE_MIN((size_t)n, cap - c->out_len);
                memcpy(c->out + c->out_len, buf, keep);
                c->out_len += keep;
                if (keep < (size_t)n) c->truncated = true;
            }
        }
        /* a grandchild (conmon's container) may hold the pipe: stop reading once the child is
         * gone and the pipe is drained */
        if (p[0].revents) exited = true;
        if (exited && !p[1].revents) break;
    }
    c->out[c->out_len] = 0;
    if (timed_out) {
        if (c->term_first) {
            kill(pid, SIGTERM);
            kite_agent_rt_wait_fd(pidfd, kite_agent_rt_mono_ns() + RT_TERM_GRACE_NS);
        }
        kill(pid, SIGKILL);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    close(pidfd);
    if (out[0] >= 0) close(out[0]);
    if (timed_out) return -ETIMEDOUT;
    c->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return 0;
}

void kite_agent_rt_run_release(struct kite_agent_rt_run *c) {
    free(c->out);
    c->out = NULL;
}
