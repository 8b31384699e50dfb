build-dev/obj/cmd/apiserver.o: src/cmd/apiserver.c src/api/quantity.h \
 src/base/base.h src/apiserver/apiserver.h src/base/clock.h \
 src/base/log.h src/cmd/cmd.h src/cmd/flags.h
src/api/quantity.h:
src/base/base.h:
src/apiserver/apiserver.h:
src/base/clock.h:
src/base/log.h:
src/cmd/cmd.h:
src/cmd/flags.h:
