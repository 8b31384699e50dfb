build-dev/obj/agent/pods/worker.o: src/agent/pods/worker.c \
 src/agent/pods/pods-int.h src/agent/pods/pods.h \
 src/agent/runtime/runtime.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/base/backoff.h src/api/podrequests.h src/api/quantity.h \
 src/base/log.h
src/agent/pods/pods-int.h:
src/agent/pods/pods.h:
src/agent/runtime/runtime.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/backoff.h:
src/api/podrequests.h:
src/api/quantity.h:
src/base/log.h:
