build-dev/obj/controllers/job.o: src/controllers/job.c \
 src/controllers/job.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/base/backoff.h src/api/registry.h src/api/schema.h src/api/table.h \
 src/api/validation.h src/json/patch.h src/base/log.h src/base/map.h \
 src/client/informer.h src/controllers/framework.h src/client/factory.h \
 src/controllers/controllers.h src/controllers/ctlutil.h \
 src/controllers/loop.h
src/controllers/job.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/backoff.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/log.h:
src/base/map.h:
src/client/informer.h:
src/controllers/framework.h:
src/client/factory.h:
src/controllers/controllers.h:
src/controllers/ctlutil.h:
src/controllers/loop.h:
