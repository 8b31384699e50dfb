build-dev/obj/controllers/registry.o: src/controllers/registry.c \
 src/controllers/controllers.h src/base/clock.h src/base/base.h \
 src/client/client.h src/base/buf.h src/client/kubeconfig.h \
 src/api/policy_rules.h src/controllers/daemonset.h \
 src/controllers/deployment.h src/controllers/disruption.h \
 src/controllers/endpointslice.h src/controllers/framework.h \
 src/client/factory.h src/client/informer.h src/controllers/gc.h \
 src/controllers/job.h src/controllers/nodecleanup.h \
 src/controllers/nodelifecycle.h src/controllers/podgc.h \
 src/controllers/replicaset.h src/controllers/tainteviction.h
src/controllers/controllers.h:
src/base/clock.h:
src/base/base.h:
src/client/client.h:
src/base/buf.h:
src/client/kubeconfig.h:
src/api/policy_rules.h:
src/controllers/daemonset.h:
src/controllers/deployment.h:
src/controllers/disruption.h:
src/controllers/endpointslice.h:
src/controllers/framework.h:
src/client/factory.h:
src/client/informer.h:
src/controllers/gc.h:
src/controllers/job.h:
src/controllers/nodecleanup.h:
src/controllers/nodelifecycle.h:
src/controllers/podgc.h:
src/controllers/replicaset.h:
src/controllers/tainteviction.h:
