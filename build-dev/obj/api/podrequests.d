build-dev/obj/api/podrequests.o: src/api/podrequests.c \
 src/api/podrequests.h src/base/base.h src/api/quantity.h \
 src/api/registry.h src/api/schema.h src/api/table.h src/base/buf.h \
 src/api/validation.h src/json/patch.h
src/api/podrequests.h:
src/base/base.h:
src/api/quantity.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
