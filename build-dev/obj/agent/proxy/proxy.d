build-dev/obj/agent/proxy/proxy.o: src/agent/proxy/proxy.c \
 src/agent/proxy/proxy.h src/client/client.h src/base/base.h \
 src/base/buf.h src/client/kubeconfig.h src/base/log.h \
 src/client/informer.h
src/agent/proxy/proxy.h:
src/client/client.h:
src/base/base.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/log.h:
src/client/informer.h:
