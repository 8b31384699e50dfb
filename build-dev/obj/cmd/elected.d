build-dev/obj/cmd/elected.o: src/cmd/elected.c src/base/log.h \
 src/base/base.h src/client/kubeconfig.h src/cmd/cmd.h src/base/clock.h \
 src/controllers/leader.h src/client/client.h src/base/buf.h
src/base/log.h:
src/base/base.h:
src/client/kubeconfig.h:
src/cmd/cmd.h:
src/base/clock.h:
src/controllers/leader.h:
src/client/client.h:
src/base/buf.h:
