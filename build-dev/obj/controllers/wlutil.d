build-dev/obj/controllers/wlutil.o: src/controllers/wlutil.c \
 src/controllers/wlutil.h src/base/clock.h src/base/base.h src/base/map.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/api/registry.h src/api/schema.h src/api/table.h src/api/validation.h \
 src/json/patch.h src/controllers/ctlutil.h
src/controllers/wlutil.h:
src/base/clock.h:
src/base/base.h:
src/base/map.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/controllers/ctlutil.h:
