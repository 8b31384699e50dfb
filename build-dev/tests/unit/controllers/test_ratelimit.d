build-dev/tests/unit/controllers/test_ratelimit.o: \
 tests/unit/controllers/test_ratelimit.c src/controllers/ratelimit.h \
 src/base/map.h src/base/base.h src/controllers/timers.h src/base/clock.h
src/controllers/ratelimit.h:
src/base/map.h:
src/base/base.h:
src/controllers/timers.h:
src/base/clock.h:
