build-dev/obj/api/table.o: src/api/table.c src/api/table.h \
 src/base/base.h src/base/buf.h src/api/kinds/kind.h src/api/registry.h \
 src/api/schema.h src/api/validation.h src/json/patch.h \
 src/api/selector.h src/base/clock.h
src/api/table.h:
src/base/base.h:
src/base/buf.h:
src/api/kinds/kind.h:
src/api/registry.h:
src/api/schema.h:
src/api/validation.h:
src/json/patch.h:
src/api/selector.h:
src/base/clock.h:
