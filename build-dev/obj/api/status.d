build-dev/obj/api/status.o: src/api/status.c src/api/status.h \
 src/api/validation.h src/base/base.h src/api/internal.h src/base/buf.h \
 src/api/registry.h src/api/schema.h src/api/table.h src/json/patch.h
src/api/status.h:
src/api/validation.h:
src/base/base.h:
src/api/internal.h:
src/base/buf.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/json/patch.h:
