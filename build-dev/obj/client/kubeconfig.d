build-dev/obj/client/kubeconfig.o: src/client/kubeconfig.c \
 src/client/kubeconfig.h src/base/base.h src/base/base64.h src/base/buf.h \
 src/api/yaml.h
src/client/kubeconfig.h:
src/base/base.h:
src/base/base64.h:
src/base/buf.h:
src/api/yaml.h:
