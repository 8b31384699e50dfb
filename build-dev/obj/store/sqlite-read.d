build-dev/obj/store/sqlite-read.o: src/store/sqlite-read.c \
 src/store/store-int.h src/store/store.h src/base/base.h src/base/map.h
src/store/store-int.h:
src/store/store.h:
src/base/base.h:
src/base/map.h:
