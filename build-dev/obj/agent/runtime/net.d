build-dev/obj/agent/runtime/net.o: src/agent/runtime/net.c \
 src/agent/runtime/net.h src/base/base.h
src/agent/runtime/net.h:
src/base/base.h:
