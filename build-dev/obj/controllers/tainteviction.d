build-dev/obj/controllers/tainteviction.o: \
 src/controllers/tainteviction.c src/controllers/tainteviction.h \
 src/base/clock.h src/base/base.h src/client/client.h src/base/buf.h \
 src/client/kubeconfig.h src/controllers/framework.h src/client/factory.h \
 src/client/informer.h src/api/registry.h src/api/schema.h \
 src/api/table.h src/api/validation.h src/json/patch.h \
 src/api/scheduling.h src/base/log.h src/base/map.h \
 src/controllers/ctlutil.h src/controllers/timers.h
src/controllers/tainteviction.h:
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
src/api/scheduling.h:
src/base/log.h:
src/base/map.h:
src/controllers/ctlutil.h:
src/controllers/timers.h:
