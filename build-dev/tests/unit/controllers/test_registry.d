build-dev/tests/unit/controllers/test_registry.o: \
 tests/unit/controllers/test_registry.c src/api/registry.h \
 src/api/schema.h src/base/base.h src/api/table.h src/base/buf.h \
 src/api/validation.h src/json/patch.h src/controllers/controllers.h \
 src/base/clock.h src/client/client.h src/client/kubeconfig.h \
 src/controllers/framework.h src/client/factory.h src/client/informer.h \
 src/controllers/gc.h
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/controllers/controllers.h:
src/base/clock.h:
src/client/client.h:
src/client/kubeconfig.h:
src/controllers/framework.h:
src/client/factory.h:
src/client/informer.h:
src/controllers/gc.h:
