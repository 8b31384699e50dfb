build-dev/obj/api/scheduling.o: src/api/scheduling.c src/api/scheduling.h \
 src/base/base.h src/api/registry.h src/api/schema.h src/api/table.h \
 src/base/buf.h src/api/validation.h src/json/patch.h
src/api/scheduling.h:
src/base/base.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
