build-dev/obj/agent/nodestatus/info.o: src/agent/nodestatus/info.c \
 src/agent/nodestatus/internal.h src/agent/nodestatus/nodestatus.h \
 src/base/clock.h src/base/base.h src/agent/runtime/runtime.h
src/agent/nodestatus/internal.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
src/agent/runtime/runtime.h:
