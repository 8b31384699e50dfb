build-dev/obj/base/buf.o: src/base/buf.c src/base/buf.h src/base/base.h
src/base/buf.h:
src/base/base.h:
