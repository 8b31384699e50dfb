/* kite-agent: the node agent as a program of its own, as the kubelet is: `kite agent`'s flags
 * and behaviour, linked without the apiserver, the store and mimalloc so that its memory is
 * the agent's alone (Makefile, BENCHMARKS.md "Where the idle 9 MB is"). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"

/* glibc's malloc gives threads arenas of their own, up to 8 per core, and each keeps the pages
 * its thread freed: the agent's dozen threads (pod workers, informers, probes, DNS, proxy) then
 * hold ~100 kB per pod running, against the < 100 kB target. Two arenas: ~75 kB per pod and
 * ~0.3 MB less idle (BENCHMARKS.md, "The agent's idle memory"); the agent allocates little
 * between its system calls, so threads rarely wait on an arena's lock. MALLOC_ARENA_MAX or a
 * glibc.malloc.arena_max tunable in the environment still decides. */
#define AGENT_ARENA_MAX 2

int main(int argc, char **argv) {
    const char *tunables = getenv("GLIBC_TUNABLES");
    if (!getenv("MALLOC_ARENA_MAX") && !(tunables && strstr(tunables, "arena_max")))
        mallopt(M_ARENA_MAX, AGENT_ARENA_MAX);
    kite_block_signals();
    return kite_cmd_agent_main("kite-agent", argc, argv);
}
