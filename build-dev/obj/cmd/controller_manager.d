build-dev/obj/cmd/controller_manager.o: src/cmd/controller_manager.c \
 src/base/log.h src/base/base.h src/client/kubeconfig.h src/cmd/cmd.h \
 src/base/clock.h src/cmd/flags.h src/apiserver/apiserver.h \
 src/controllers/controllers.h src/client/client.h src/base/buf.h \
 src/controllers/framework.h src/client/factory.h src/client/informer.h \
 src/controllers/leader.h src/controllers/nodelifecycle.h src/pki/pki.h
src/base/log.h:
src/base/base.h:
src/client/kubeconfig.h:
src/cmd/cmd.h:
src/base/clock.h:
src/cmd/flags.h:
src/apiserver/apiserver.h:
src/controllers/controllers.h:
src/client/client.h:
src/base/buf.h:
src/controllers/framework.h:
src/client/factory.h:
src/client/informer.h:
src/controllers/leader.h:
src/controllers/nodelifecycle.h:
src/pki/pki.h:
