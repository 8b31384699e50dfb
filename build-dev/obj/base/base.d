build-dev/obj/base/base.o: src/base/base.c src/base/base.h src/base/buf.h
src/base/base.h:
src/base/buf.h:
