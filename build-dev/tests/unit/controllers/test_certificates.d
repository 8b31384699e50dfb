build-dev/tests/unit/controllers/test_certificates.o: \
 tests/unit/controllers/test_certificates.c src/controllers/controllers.h \
 src/base/clock.h src/base/base.h src/client/client.h src/base/buf.h \
 src/client/kubeconfig.h src/base/base64.h src/api/registry.h \
 src/api/schema.h src/api/table.h src/api/validation.h src/json/patch.h \
 src/pki/pki.h
src/controllers/controllers.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/base64.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/pki/pki.h:
