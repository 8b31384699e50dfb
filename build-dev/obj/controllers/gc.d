build-dev/obj/controllers/gc.o: src/controllers/gc.c src/controllers/gc.h \
 src/base/clock.h src/base/base.h src/client/client.h src/base/buf.h \
 src/client/kubeconfig.h src/controllers/framework.h src/client/factory.h \
 src/client/informer.h src/api/registry.h src/api/schema.h \
 src/api/table.h src/api/validation.h src/json/patch.h src/base/log.h \
 src/base/map.h src/controllers/workqueue.h src/controllers/timers.h \
 src/controllers/wlutil.h
src/controllers/gc.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/controllers/framework.h:
src/client/factory.h:
src/client/informer.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/log.h:
src/base/map.h:
src/controllers/workqueue.h:
src/controllers/timers.h:
src/controllers/wlutil.h:
