build-dev/obj/api/kinds/daemonset.o: src/api/kinds/daemonset.c \
 src/api/kinds/workload.h src/api/kinds/kind.h src/api/registry.h \
 src/api/schema.h src/base/base.h src/api/table.h src/base/buf.h \
 src/api/validation.h src/json/patch.h src/api/selector.h \
 src/base/clock.h
src/api/kinds/workload.h:
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
