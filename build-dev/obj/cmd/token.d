build-dev/obj/cmd/token.o: src/cmd/token.c src/base/base64.h \
 src/base/buf.h src/base/base.h src/api/registry.h src/api/schema.h \
 src/api/table.h src/api/validation.h src/json/patch.h src/base/clock.h \
 src/client/client.h src/client/kubeconfig.h src/cmd/cmd.h \
 src/cmd/flags.h
src/base/base64.h:
src/base/buf.h:
src/base/base.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/base/clock.h:
src/client/client.h:
src/client/kubeconfig.h:
src/cmd/cmd.h:
src/cmd/flags.h:
