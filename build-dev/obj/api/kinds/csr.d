build-dev/obj/api/kinds/csr.o: src/api/kinds/csr.c src/api/kinds/kind.h \
 src/api/registry.h src/api/schema.h src/base/base.h src/api/table.h \
 src/base/buf.h src/api/validation.h src/json/patch.h src/api/selector.h \
 src/base/clock.h src/base/base64.h
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
src/base/base64.h:
