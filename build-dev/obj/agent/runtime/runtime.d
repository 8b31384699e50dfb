build-dev/obj/agent/runtime/runtime.o: src/agent/runtime/runtime.c \
 src/agent/runtime/runtime.h src/base/base.h
src/agent/runtime/runtime.h:
src/base/base.h:
