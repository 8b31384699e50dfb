build-dev/obj/base/gotime.o: src/base/gotime.c src/base/gotime.h \
 src/base/base.h src/base/clock.h
src/base/gotime.h:
src/base/base.h:
src/base/clock.h:
