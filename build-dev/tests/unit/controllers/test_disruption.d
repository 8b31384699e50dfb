build-dev/tests/unit/controllers/test_disruption.o: \
 tests/unit/controllers/test_disruption.c src/controllers/disruption.h \
 src/base/clock.h src/base/base.h src/client/client.h src/base/buf.h \
 src/client/kubeconfig.h src/api/disruption.h src/api/registry.h \
 src/api/schema.h src/api/table.h src/api/validation.h src/json/patch.h \
 src/base/log.h tests/unit/controllers/fakeapi.h src/base/map.h
src/controllers/disruption.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/api/disruption.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/log.h:
tests/unit/controllers/fakeapi.h:
src/base/map.h:
