build-dev/obj/store/record.o: src/store/record.c src/store/store-int.h \
 src/store/store.h src/base/base.h src/base/map.h
src/store/store-int.h:
src/store/store.h:
src/base/base.h:
src/base/map.h:
