build-dev/obj/base/base64.o: src/base/base64.c src/base/base64.h \
 src/base/buf.h src/base/base.h
src/base/base64.h:
src/base/buf.h:
src/base/base.h:
