build-dev/obj/base/backoff.o: src/base/backoff.c src/base/backoff.h \
 src/base/base.h
src/base/backoff.h:
src/base/base.h:
