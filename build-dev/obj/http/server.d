build-dev/obj/http/server.o: src/http/server.c src/http/http-internal.h \
 src/http/http.h src/base/base.h src/http/request.h src/base/buf.h \
 src/base/clock.h src/base/map.h
src/http/http-internal.h:
src/http/http.h:
src/base/base.h:
src/http/request.h:
src/base/buf.h:
src/base/clock.h:
src/base/map.h:
