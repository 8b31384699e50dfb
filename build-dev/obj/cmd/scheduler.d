build-dev/obj/cmd/scheduler.o: src/cmd/scheduler.c src/base/log.h \
 src/base/base.h src/client/kubeconfig.h src/cmd/cmd.h src/base/clock.h \
 src/cmd/flags.h src/controllers/framework.h src/client/client.h \
 src/base/buf.h src/client/factory.h src/client/informer.h \
 src/controllers/leader.h src/controllers/scheduler.h
src/base/log.h:
src/base/base.h:
src/client/kubeconfig.h:
src/cmd/cmd.h:
src/base/clock.h:
src/cmd/flags.h:
src/controllers/framework.h:
src/client/client.h:
src/base/buf.h:
src/client/factory.h:
src/client/informer.h:
src/controllers/leader.h:
src/controllers/scheduler.h:
