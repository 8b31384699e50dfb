build-dev/obj/api/quantity.o: src/api/quantity.c src/api/quantity.h \
 src/base/base.h
src/api/quantity.h:
src/base/base.h:
