build-dev/tests/unit/controllers/test_gc.o: \
 tests/unit/controllers/test_gc.c src/controllers/gc.h src/base/clock.h \
 src/base/base.h src/client/client.h src/base/buf.h \
 src/client/kubeconfig.h src/base/log.h tests/unit/controllers/fakeapi.h \
 src/api/registry.h src/api/schema.h src/api/table.h src/api/validation.h \
 src/json/patch.h src/base/map.h
src/controllers/gc.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/log.h:
tests/unit/controllers/fakeapi.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/map.h:
