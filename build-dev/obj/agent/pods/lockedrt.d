build-dev/obj/agent/pods/lockedrt.o: src/agent/pods/lockedrt.c \
 src/agent/pods/pods.h src/agent/runtime/runtime.h src/base/clock.h \
 src/base/base.h src/client/client.h src/base/buf.h \
 src/client/kubeconfig.h
src/agent/pods/pods.h:
src/agent/runtime/runtime.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
