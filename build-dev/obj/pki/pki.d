build-dev/obj/pki/pki.o: src/pki/pki.c src/pki/pki.h src/base/base.h \
 src/base/base64.h src/base/buf.h
src/pki/pki.h:
src/base/base.h:
src/base/base64.h:
src/base/buf.h:
