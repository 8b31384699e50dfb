build-dev/obj/agent/pods/status.o: src/agent/pods/status.c \
 src/agent/pods/pods-int.h src/agent/pods/pods.h \
 src/agent/runtime/runtime.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/base/backoff.h src/api/registry.h src/api/schema.h src/api/table.h \
 src/api/validation.h src/json/patch.h src/api/quantity.h src/base/log.h
src/agent/pods/pods-int.h:
src/agent/pods/pods.h:
src/agent/runtime/runtime.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/backoff.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/api/quantity.h:
src/base/log.h:
