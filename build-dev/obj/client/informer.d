build-dev/obj/client/informer.o: src/client/informer.c \
 src/client/informer.h src/client/client.h src/base/base.h src/base/buf.h \
 src/client/kubeconfig.h src/api/registry.h src/api/schema.h \
 src/api/table.h src/api/validation.h src/json/patch.h src/base/backoff.h \
 src/base/clock.h src/base/map.h
src/client/informer.h:
src/client/client.h:
src/base/base.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/backoff.h:
src/base/clock.h:
src/base/map.h:
