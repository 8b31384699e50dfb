build-dev/tests/unit/controllers/test_workqueue.o: \
 tests/unit/controllers/test_workqueue.c src/controllers/workqueue.h \
 src/base/clock.h src/base/base.h src/base/map.h src/controllers/timers.h
src/controllers/workqueue.h:
src/base/clock.h:
src/base/base.h:
src/base/map.h:
src/controllers/timers.h:
