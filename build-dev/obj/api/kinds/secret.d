build-dev/obj/api/kinds/secret.o: src/api/kinds/secret.c \
 src/api/kinds/data.h src/api/kinds/kind.h src/api/registry.h \
 src/api/schema.h src/base/base.h src/api/table.h src/base/buf.h \
 src/api/validation.h src/json/patch.h src/api/selector.h \
 src/base/clock.h
src/api/kinds/data.h:
src/api/kinds/kind.h:
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/api/selector.h:
src/base/clock.h:
