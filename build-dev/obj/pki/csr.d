build-dev/obj/pki/csr.o: src/pki/csr.c src/pki/pki.h src/base/base.h
src/pki/pki.h:
src/base/base.h:
