build-dev/obj/agent/nodestatus/addresses.o: \
 src/agent/nodestatus/addresses.c src/agent/nodestatus/internal.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h
src/agent/nodestatus/internal.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
