build-dev/obj/cmd/flags.o: src/cmd/flags.c src/cmd/flags.h \
 src/api/quantity.h src/base/base.h src/base/buf.h src/base/clock.h
src/cmd/flags.h:
src/api/quantity.h:
src/base/base.h:
src/base/buf.h:
src/base/clock.h:
