build-dev/obj/agent/nodestatus/nodestatus.o: \
 src/agent/nodestatus/nodestatus.c src/agent/nodestatus/internal.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h
src/agent/nodestatus/internal.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
