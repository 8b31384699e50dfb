/* kite-agent: the node agent as a program of its own, as the kubelet is: `kite agent`'s flags
 * and behaviour, linked without the apiserver, the store and mimalloc so that its memory is
 * the agent's alone (Makefile, BENCHMARKS.md "Where the idle 9 MB is"). */
#include "cmd/cmd.h"

int main(int argc, char **argv) {
    kite_block_signals();
    return kite_cmd_agent_main("kite-agent", argc, argv);
}
