build-dev/obj/client/factory.o: src/client/factory.c src/client/factory.h \
 src/client/informer.h src/client/client.h src/base/base.h src/base/buf.h \
 src/client/kubeconfig.h
src/client/factory.h:
src/client/informer.h:
src/client/client.h:
src/base/base.h:
src/base/buf.h:
src/client/kubeconfig.h:
