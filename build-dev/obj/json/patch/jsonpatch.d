build-dev/obj/json/patch/jsonpatch.o: src/json/patch/jsonpatch.c \
 src/json/patch/internal.h src/base/buf.h src/base/base.h src/base/map.h \
 src/json/patch.h
src/json/patch/internal.h:
src/base/buf.h:
src/base/base.h:
src/base/map.h:
src/json/patch.h:
