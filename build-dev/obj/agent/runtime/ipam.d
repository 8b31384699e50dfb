build-dev/obj/agent/runtime/ipam.o: src/agent/runtime/ipam.c \
 src/agent/runtime/ipam.h src/base/base.h
src/agent/runtime/ipam.h:
src/base/base.h:
