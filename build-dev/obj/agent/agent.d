build-dev/obj/agent/agent.o: src/agent/agent.c src/agent/agent-int.h \
 src/agent/agent.h src/agent/nodestatus/nodestatus.h src/base/clock.h \
 src/base/base.h src/client/client.h src/base/buf.h \
 src/client/kubeconfig.h src/agent/pods/pods.h \
 src/agent/runtime/runtime.h src/agent/proxy/proxy.h src/base/backoff.h \
 src/json/patch.h src/agent/logs/logs.h src/pki/pki.h src/base/version.h \
 src/agent/runtime/net.h src/base/log.h
src/agent/agent-int.h:
src/agent/agent.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/agent/pods/pods.h:
src/agent/runtime/runtime.h:
src/agent/proxy/proxy.h:
src/base/backoff.h:
src/json/patch.h:
src/agent/logs/logs.h:
src/pki/pki.h:
src/base/version.h:
src/agent/runtime/net.h:
src/base/log.h:
