build-dev/obj/cmd/main.o: src/cmd/main.c src/cmd/cmd.h src/base/clock.h \
 src/base/base.h
src/cmd/cmd.h:
src/base/clock.h:
src/base/base.h:
