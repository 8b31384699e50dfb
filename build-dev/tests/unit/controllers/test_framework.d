build-dev/tests/unit/controllers/test_framework.o: \
 tests/unit/controllers/test_framework.c src/api/registry.h \
 src/api/schema.h src/base/base.h src/api/table.h src/base/buf.h \
 src/api/validation.h src/json/patch.h src/base/clock.h \
 src/controllers/framework.h src/client/client.h src/client/kubeconfig.h \
 src/client/factory.h src/client/informer.h
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/base/clock.h:
src/controllers/framework.h:
src/client/client.h:
src/client/kubeconfig.h:
src/client/factory.h:
src/client/informer.h:
