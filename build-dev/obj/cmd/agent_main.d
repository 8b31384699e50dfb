build-dev/obj/cmd/agent_main.o: src/cmd/agent_main.c src/cmd/cmd.h \
 src/base/clock.h src/base/base.h
src/cmd/cmd.h:
src/base/clock.h:
src/base/base.h:
