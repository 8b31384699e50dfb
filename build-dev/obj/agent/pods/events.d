build-dev/obj/agent/pods/events.o: src/agent/pods/events.c \
 src/api/events.h src/agent/pods/pods-int.h src/agent/pods/pods.h \
 src/agent/runtime/runtime.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/base/backoff.h src/base/log.h
src/api/events.h:
src/agent/pods/pods-int.h:
src/agent/pods/pods.h:
src/agent/runtime/runtime.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/backoff.h:
src/base/log.h:
