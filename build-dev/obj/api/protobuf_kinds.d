build-dev/obj/api/protobuf_kinds.o: src/api/protobuf_kinds.c \
 src/api/protobuf.h src/api/schema.h src/base/base.h src/base/buf.h \
 src/api/registry.h src/api/table.h src/api/validation.h src/json/patch.h
src/api/protobuf.h:
src/api/schema.h:
src/base/base.h:
src/base/buf.h:
src/api/registry.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
