build-dev/obj/controllers/endpointslice_ctl.o: \
 src/controllers/endpointslice_ctl.c src/client/informer.h \
 src/client/client.h src/base/base.h src/base/buf.h \
 src/client/kubeconfig.h src/controllers/framework.h src/base/clock.h \
 src/client/factory.h src/controllers/workqueue.h src/base/map.h \
 src/controllers/timers.h src/controllers/ctlutil.h \
 src/controllers/endpointslice.h src/api/registry.h src/api/schema.h \
 src/api/table.h src/api/validation.h src/json/patch.h src/base/log.h
src/client/informer.h:
src/client/client.h:
src/base/base.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/controllers/framework.h:
src/base/clock.h:
src/client/factory.h:
src/controllers/workqueue.h:
src/base/map.h:
src/controllers/timers.h:
src/controllers/ctlutil.h:
src/controllers/endpointslice.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/log.h:
