build-dev/obj/cmd/signals.o: src/cmd/signals.c src/cmd/cmd.h \
 src/base/clock.h src/base/base.h
src/cmd/cmd.h:
src/base/clock.h:
src/base/base.h:
