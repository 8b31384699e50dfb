build-dev/obj/agent/runtime/proc.o: src/agent/runtime/proc.c \
 src/agent/runtime/proc.h src/base/base.h src/base/clock.h
src/agent/runtime/proc.h:
src/base/base.h:
src/base/clock.h:
