build-dev/obj/api/disruption.o: src/api/disruption.c src/api/disruption.h \
 src/api/registry.h src/api/schema.h src/base/base.h src/api/table.h \
 src/base/buf.h src/api/validation.h src/json/patch.h src/base/clock.h
src/api/disruption.h:
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/base/clock.h:
