build-dev/obj/http/fetch.o: src/http/fetch.c src/http/http.h \
 src/base/base.h src/base/buf.h
src/http/http.h:
src/base/base.h:
src/base/buf.h:
