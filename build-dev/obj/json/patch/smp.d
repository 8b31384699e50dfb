build-dev/obj/json/patch/smp.o: src/json/patch/smp.c \
 src/json/patch/internal.h src/base/buf.h src/base/base.h src/base/map.h \
 src/json/patch.h
src/json/patch/internal.h:
src/base/buf.h:
src/base/base.h:
src/base/map.h:
src/json/patch.h:
