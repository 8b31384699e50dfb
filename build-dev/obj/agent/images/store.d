build-dev/obj/agent/images/store.o: src/agent/images/store.c \
 src/agent/images/images.h src/agent/runtime/runtime.h \
 src/agent/images/libarchive.h src/base/base.h
src/agent/images/images.h:
src/agent/runtime/runtime.h:
src/agent/images/libarchive.h:
src/base/base.h:
