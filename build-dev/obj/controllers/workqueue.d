build-dev/obj/controllers/workqueue.o: src/controllers/workqueue.c \
 src/controllers/workqueue.h src/base/clock.h src/base/base.h \
 src/base/map.h src/controllers/timers.h src/base/backoff.h
src/controllers/workqueue.h:
src/base/clock.h:
src/base/base.h:
src/base/map.h:
src/controllers/timers.h:
src/base/backoff.h:
