build-dev/obj/controllers/leader.o: src/controllers/leader.c \
 src/controllers/leader.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/api/registry.h src/api/schema.h src/api/table.h src/api/validation.h \
 src/json/patch.h src/base/backoff.h src/base/log.h
src/controllers/leader.h:
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
src/base/backoff.h:
src/base/log.h:
