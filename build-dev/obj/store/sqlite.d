build-dev/obj/store/sqlite.o: src/store/sqlite.c src/store/store-int.h \
 src/store/store.h src/base/base.h src/base/map.h src/base/clock.h
src/store/store-int.h:
src/store/store.h:
src/base/base.h:
src/base/map.h:
src/base/clock.h:
