build-dev/obj/cmd/images.o: src/cmd/images.c src/agent/agent.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/agent/runtime/runtime.h src/cmd/cmd.h src/cmd/flags.h
src/agent/agent.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/agent/runtime/runtime.h:
src/cmd/cmd.h:
src/cmd/flags.h:
