build-dev/obj/controllers/framework.o: src/controllers/framework.c \
 src/controllers/framework.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/client/factory.h src/client/informer.h src/controllers/loop.h \
 src/controllers/workqueue.h src/base/map.h src/controllers/timers.h
src/controllers/framework.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/client/factory.h:
src/client/informer.h:
src/controllers/loop.h:
src/controllers/workqueue.h:
src/base/map.h:
src/controllers/timers.h:
