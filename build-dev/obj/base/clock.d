build-dev/obj/base/clock.o: src/base/clock.c src/base/clock.h \
 src/base/base.h src/base/gotime.h
src/base/clock.h:
src/base/base.h:
src/base/gotime.h:
