build-dev/obj/api/protobuf.o: src/api/protobuf.c src/api/protobuf.h \
 src/api/schema.h src/base/base.h src/base/buf.h src/base/base64.h \
 src/json/parse.h
src/api/protobuf.h:
src/api/schema.h:
src/base/base.h:
src/base/buf.h:
src/base/base64.h:
src/json/parse.h:
