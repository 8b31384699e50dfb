build-dev/obj/base/log.o: src/base/log.c src/base/log.h src/base/base.h \
 src/base/clock.h
src/base/log.h:
src/base/base.h:
src/base/clock.h:
