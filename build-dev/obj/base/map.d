build-dev/obj/base/map.o: src/base/map.c src/base/map.h src/base/base.h
src/base/map.h:
src/base/base.h:
