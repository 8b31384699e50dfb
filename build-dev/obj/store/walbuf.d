build-dev/obj/store/walbuf.o: src/store/walbuf.c src/store/store-int.h \
 src/store/store.h src/base/base.h src/base/map.h
src/store/store-int.h:
src/store/store.h:
src/base/base.h:
src/base/map.h:
