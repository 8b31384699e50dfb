build-dev/obj/client/common.o: src/client/common.c src/client/client.h \
 src/base/base.h src/base/buf.h src/client/kubeconfig.h src/base/clock.h
src/client/client.h:
src/base/base.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/base/clock.h:
