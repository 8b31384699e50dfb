build-dev/obj/store/wcache.o: src/store/wcache.c src/store/wcache.h \
 src/store/store.h src/base/base.h src/base/map.h
src/store/wcache.h:
src/store/store.h:
src/base/base.h:
src/base/map.h:
