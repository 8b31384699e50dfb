build-dev/obj/api/selector.o: src/api/selector.c src/api/selector.h \
 src/base/base.h src/base/buf.h src/api/internal.h src/api/validation.h
src/api/selector.h:
src/base/base.h:
src/base/buf.h:
src/api/internal.h:
src/api/validation.h:
