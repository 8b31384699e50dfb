build-dev/obj/cmd/tools.o: src/cmd/tools.c src/base/base.h \
 src/client/kubeconfig.h src/cmd/cmd.h src/base/clock.h src/cmd/flags.h \
 src/pki/pki.h src/base/version.h
src/base/base.h:
src/client/kubeconfig.h:
src/cmd/cmd.h:
src/base/clock.h:
src/cmd/flags.h:
src/pki/pki.h:
src/base/version.h:
