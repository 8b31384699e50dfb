build-dev/obj/controllers/scheduler_algo.o: \
 src/controllers/scheduler_algo.c src/api/podrequests.h src/base/base.h \
 src/api/quantity.h src/api/registry.h src/api/schema.h src/api/table.h \
 src/base/buf.h src/api/validation.h src/json/patch.h \
 src/api/scheduling.h src/controllers/scheduler.h src/base/clock.h \
 src/client/client.h src/client/kubeconfig.h
src/api/podrequests.h:
src/base/base.h:
src/api/quantity.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/api/scheduling.h:
src/controllers/scheduler.h:
src/base/clock.h:
src/client/client.h:
src/client/kubeconfig.h:
