build-dev/obj/agent/certmgr.o: src/agent/certmgr.c src/agent/certmgr.h \
 src/client/client.h src/base/base.h src/base/buf.h \
 src/client/kubeconfig.h src/base/base64.h src/api/registry.h \
 src/api/schema.h src/api/table.h src/api/validation.h src/json/patch.h \
 src/base/backoff.h src/base/clock.h src/base/log.h src/pki/pki.h
src/agent/certmgr.h:
src/client/client.h:
src/base/base.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/base64.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/backoff.h:
src/base/clock.h:
src/base/log.h:
src/pki/pki.h:
