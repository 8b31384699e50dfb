build-dev/obj/json/parse.o: src/json/parse.c src/json/parse.h \
 src/base/buf.h src/base/base.h
src/json/parse.h:
src/base/buf.h:
src/base/base.h:
