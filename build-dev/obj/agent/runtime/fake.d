build-dev/obj/agent/runtime/fake.o: src/agent/runtime/fake.c \
 src/agent/images/images.h src/agent/runtime/runtime.h src/base/base.h \
 src/base/clock.h
src/agent/images/images.h:
src/agent/runtime/runtime.h:
src/base/base.h:
src/base/clock.h:
