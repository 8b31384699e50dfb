build-dev/obj/controllers/loop.o: src/controllers/loop.c \
 src/controllers/loop.h src/base/base.h src/client/informer.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/base/clock.h
src/controllers/loop.h:
src/base/base.h:
src/client/informer.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/clock.h:
