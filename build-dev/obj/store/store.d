build-dev/obj/store/store.o: src/store/store.c src/store/store.h \
 src/base/base.h
src/store/store.h:
src/base/base.h:
