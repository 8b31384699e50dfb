build-dev/obj/cmd/nodes.o: src/cmd/nodes.c src/api/registry.h \
 src/api/schema.h src/base/base.h src/api/table.h src/base/buf.h \
 src/api/validation.h src/json/patch.h src/base/log.h src/client/client.h \
 src/client/kubeconfig.h src/cmd/cmd.h src/base/clock.h src/cmd/flags.h
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/base/log.h:
src/client/client.h:
src/client/kubeconfig.h:
src/cmd/cmd.h:
src/base/clock.h:
src/cmd/flags.h:
