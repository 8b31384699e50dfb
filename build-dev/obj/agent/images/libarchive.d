build-dev/obj/agent/images/libarchive.o: src/agent/images/libarchive.c \
 src/agent/images/libarchive.h src/base/base.h
src/agent/images/libarchive.h:
src/base/base.h:
