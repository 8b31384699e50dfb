build-dev/obj/store/crypt.o: src/store/crypt.c src/store/store-int.h \
 src/store/store.h src/base/base.h src/base/map.h
src/store/store-int.h:
src/store/store.h:
src/base/base.h:
src/base/map.h:
