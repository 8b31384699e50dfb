build-dev/obj/controllers/ctlutil.o: src/controllers/ctlutil.c \
 src/controllers/ctlutil.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/api/events.h src/api/registry.h src/api/schema.h src/api/table.h \
 src/api/validation.h src/json/patch.h
src/controllers/ctlutil.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/api/events.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
