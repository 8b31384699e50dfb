build-dev/obj/cmd/agent.o: src/cmd/agent.c src/agent/agent.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/agent/certmgr.h src/agent/proxy/proxy.h src/base/log.h src/cmd/cmd.h \
 src/cmd/flags.h
src/agent/agent.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/agent/certmgr.h:
src/agent/proxy/proxy.h:
src/base/log.h:
src/cmd/cmd.h:
src/cmd/flags.h:
