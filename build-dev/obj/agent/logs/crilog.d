build-dev/obj/agent/logs/crilog.o: src/agent/logs/crilog.c \
 src/agent/logs/logs.h src/base/buf.h src/base/base.h src/api/schema.h \
 src/base/clock.h
src/agent/logs/logs.h:
src/base/buf.h:
src/base/base.h:
src/api/schema.h:
src/base/clock.h:
