build-dev/obj/agent/register.o: src/agent/register.c src/api/events.h \
 src/agent/agent-int.h src/agent/agent.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/agent/pods/pods.h src/agent/runtime/runtime.h \
 src/agent/proxy/proxy.h src/base/backoff.h src/json/patch.h \
 src/api/registry.h src/api/schema.h src/api/table.h src/api/validation.h \
 src/base/log.h
src/api/events.h:
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
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/base/log.h:
