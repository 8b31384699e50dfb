build-dev/obj/controllers/ratelimit.o: src/controllers/ratelimit.c \
 src/controllers/ratelimit.h src/base/map.h src/base/base.h \
 src/base/clock.h
src/controllers/ratelimit.h:
src/base/map.h:
src/base/base.h:
src/base/clock.h:
