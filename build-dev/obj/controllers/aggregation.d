build-dev/obj/controllers/aggregation.o: src/controllers/aggregation.c \
 src/controllers/controllers.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/api/registry.h src/api/schema.h src/api/table.h src/api/validation.h \
 src/json/patch.h src/client/informer.h src/controllers/framework.h \
 src/client/factory.h src/base/log.h src/base/map.h
src/controllers/controllers.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/client/informer.h:
src/controllers/framework.h:
src/client/factory.h:
src/base/log.h:
src/base/map.h:
