build-dev/obj/agent/logs/server.o: src/agent/logs/server.c \
 src/agent/logs/logs.h src/base/buf.h src/base/base.h \
 src/agent/pods/pods.h src/agent/runtime/runtime.h src/base/clock.h \
 src/client/client.h src/client/kubeconfig.h src/api/schema.h \
 src/base/log.h src/http/http.h src/pki/pki.h
src/agent/logs/logs.h:
src/base/buf.h:
src/base/base.h:
src/agent/pods/pods.h:
src/agent/runtime/runtime.h:
src/base/clock.h:
src/client/client.h:
src/client/kubeconfig.h:
src/api/schema.h:
src/base/log.h:
src/http/http.h:
src/pki/pki.h:
