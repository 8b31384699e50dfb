build-dev/tests/unit/controllers/fakeapi.o: \
 tests/unit/controllers/fakeapi.c tests/unit/controllers/fakeapi.h \
 src/api/registry.h src/api/schema.h src/base/base.h src/api/table.h \
 src/base/buf.h src/api/validation.h src/json/patch.h src/base/map.h \
 src/client/client.h src/client/kubeconfig.h
tests/unit/controllers/fakeapi.h:
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/base/map.h:
src/client/client.h:
src/client/kubeconfig.h:
