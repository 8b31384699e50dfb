build-dev/tests/unit/cmd/test_flags.o: tests/unit/cmd/test_flags.c \
 src/base/clock.h src/base/base.h src/cmd/flags.h
src/base/clock.h:
src/base/base.h:
src/cmd/flags.h:
