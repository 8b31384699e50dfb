build-dev/obj/json/patch/common.o: src/json/patch/common.c \
 src/json/patch/internal.h src/base/buf.h src/base/base.h src/base/map.h \
 src/json/patch.h
src/json/patch/internal.h:
src/base/buf.h:
src/base/base.h:
src/base/map.h:
src/json/patch.h:
