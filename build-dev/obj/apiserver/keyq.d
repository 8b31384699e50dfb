build-dev/obj/apiserver/keyq.o: src/apiserver/keyq.c src/apiserver/keyq.h \
 src/base/base.h src/base/map.h
src/apiserver/keyq.h:
src/base/base.h:
src/base/map.h:
