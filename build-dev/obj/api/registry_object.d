build-dev/obj/api/registry_object.o: src/api/registry_object.c \
 src/api/registry.h src/api/schema.h src/base/base.h src/api/table.h \
 src/base/buf.h src/api/validation.h src/json/patch.h src/json/parse.h
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/json/parse.h:
