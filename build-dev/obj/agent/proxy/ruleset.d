build-dev/obj/agent/proxy/ruleset.o: src/agent/proxy/ruleset.c \
 src/agent/proxy/proxy.h src/client/client.h src/base/base.h \
 src/base/buf.h src/client/kubeconfig.h src/api/registry.h \
 src/api/schema.h src/api/table.h src/api/validation.h src/json/patch.h
src/agent/proxy/proxy.h:
src/client/client.h:
src/base/base.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
