build-dev/obj/controllers/scheduler_run.o: \
 src/controllers/scheduler_run.c src/controllers/framework.h \
 src/base/clock.h src/base/base.h src/client/client.h src/base/buf.h \
 src/client/kubeconfig.h src/client/factory.h src/client/informer.h \
 src/controllers/scheduler.h
src/controllers/framework.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/client/factory.h:
src/client/informer.h:
src/controllers/scheduler.h:
