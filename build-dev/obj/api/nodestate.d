build-dev/obj/api/nodestate.o: src/api/nodestate.c src/api/nodestate.h \
 src/base/buf.h src/base/base.h src/api/registry.h src/api/schema.h \
 src/api/table.h src/api/validation.h src/json/patch.h src/base/clock.h
src/api/nodestate.h:
src/base/buf.h:
src/base/base.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/clock.h:
