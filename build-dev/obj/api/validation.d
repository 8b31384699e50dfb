build-dev/obj/api/validation.o: src/api/validation.c src/api/validation.h \
 src/base/base.h src/api/internal.h src/base/buf.h
src/api/validation.h:
src/base/base.h:
src/api/internal.h:
src/base/buf.h:
