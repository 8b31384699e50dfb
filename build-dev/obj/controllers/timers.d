build-dev/obj/controllers/timers.o: src/controllers/timers.c \
 src/controllers/timers.h src/base/base.h
src/controllers/timers.h:
src/base/base.h:
