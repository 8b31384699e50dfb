build-dev/obj/agent/nodestatus/conditions.o: \
 src/agent/nodestatus/conditions.c src/agent/nodestatus/internal.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h \
 src/base/buf.h
src/agent/nodestatus/internal.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
src/base/buf.h:
