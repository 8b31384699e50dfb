build-dev/obj/client/transport.o: src/client/transport.c src/base/buf.h \
 src/base/base.h src/base/clock.h src/json/parse.h src/client/client.h \
 src/client/kubeconfig.h
src/base/buf.h:
src/base/base.h:
src/base/clock.h:
src/json/parse.h:
src/client/client.h:
src/client/kubeconfig.h:
