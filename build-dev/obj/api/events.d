build-dev/obj/api/events.o: src/api/events.c src/api/events.h \
 src/api/registry.h src/api/schema.h src/base/base.h src/api/table.h \
 src/base/buf.h src/api/validation.h src/json/patch.h src/base/clock.h
src/api/events.h:
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/base/clock.h:
