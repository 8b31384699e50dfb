build-dev/obj/cmd/up.o: src/cmd/up.c src/agent/agent.h \
 src/agent/nodestatus/nodestatus.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/agent/runtime/net.h src/apiserver/apiserver.h src/base/log.h \
 src/cmd/cmd.h src/cmd/flags.h src/controllers/controllers.h \
 src/pki/pki.h
src/agent/agent.h:
src/agent/nodestatus/nodestatus.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/agent/runtime/net.h:
src/apiserver/apiserver.h:
src/base/log.h:
src/cmd/cmd.h:
src/cmd/flags.h:
src/controllers/controllers.h:
src/pki/pki.h:
