build-dev/obj/agent/nodestatus/capacity.o: \
 src/agent/nodestatus/capacity.c src/agent/nodestatus/internal.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h \
 src/api/quantity.h
src/agent/nodestatus/internal.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
src/api/quantity.h:
