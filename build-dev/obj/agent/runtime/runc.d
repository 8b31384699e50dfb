build-dev/obj/agent/runtime/runc.o: src/agent/runtime/runc.c \
 src/agent/images/images.h src/agent/runtime/ipam.h \
 src/agent/runtime/net.h src/agent/runtime/proc.h \
 src/agent/runtime/runtime.h src/base/base.h src/base/clock.h
src/agent/images/images.h:
src/agent/runtime/ipam.h:
src/agent/runtime/net.h:
src/agent/runtime/proc.h:
src/agent/runtime/runtime.h:
src/base/base.h:
src/base/clock.h:
