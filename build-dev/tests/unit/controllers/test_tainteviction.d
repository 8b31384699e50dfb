build-dev/tests/unit/controllers/test_tainteviction.o: \
 tests/unit/controllers/test_tainteviction.c \
 src/controllers/tainteviction.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/base/log.h tests/unit/controllers/fakeapi.h src/api/registry.h \
 src/api/schema.h src/api/table.h src/api/validation.h src/json/patch.h \
 src/base/map.h
src/controllers/tainteviction.h:
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
