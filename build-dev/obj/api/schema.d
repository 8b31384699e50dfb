build-dev/obj/api/schema.o: src/api/schema.c src/api/schema.h \
 src/base/base.h src/api/quantity.h src/base/base64.h src/base/buf.h \
 src/base/clock.h src/base/gotime.h src/json/parse.h
src/api/schema.h:
src/base/base.h:
src/api/quantity.h:
src/base/base64.h:
src/base/buf.h:
src/base/clock.h:
src/base/gotime.h:
src/json/parse.h:
