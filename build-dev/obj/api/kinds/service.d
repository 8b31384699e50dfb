build-dev/obj/api/kinds/service.o: src/api/kinds/service.c \
 src/api/internal.h src/base/buf.h src/base/base.h src/api/kinds/kind.h \
 src/api/registry.h src/api/schema.h src/api/table.h src/api/validation.h \
 src/json/patch.h src/api/selector.h src/base/clock.h
src/api/internal.h:
src/base/buf.h:
src/base/base.h:
src/api/kinds/kind.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/api/selector.h:
src/base/clock.h:
