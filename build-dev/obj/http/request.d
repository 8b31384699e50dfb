build-dev/obj/http/request.o: src/http/request.c src/http/request.h \
 src/base/buf.h src/base/base.h
src/http/request.h:
src/base/buf.h:
src/base/base.h:
