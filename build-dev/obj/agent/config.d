build-dev/obj/agent/config.o: src/agent/config.c src/agent/agent.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/agent/pods/pods.h src/agent/runtime/runtime.h \
 src/agent/runtime/ipam.h src/agent/runtime/net.h src/api/quantity.h \
 src/api/yaml.h
src/agent/agent.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/agent/pods/pods.h:
src/agent/runtime/runtime.h:
src/agent/runtime/ipam.h:
src/agent/runtime/net.h:
src/api/quantity.h:
src/api/yaml.h:
