build-dev/obj/apiserver/admission_csr.o: src/apiserver/admission_csr.c \
 src/base/base64.h src/base/buf.h src/base/base.h \
 src/apiserver/internal.h src/api/registry.h src/api/schema.h \
 src/api/table.h src/api/validation.h src/json/patch.h src/api/selector.h \
 src/apiserver/apiserver.h src/base/clock.h src/base/log.h \
 src/http/http.h src/store/store.h src/store/wcache.h src/pki/pki.h
src/base/base64.h:
src/base/buf.h:
src/base/base.h:
src/apiserver/internal.h:
src/api/registry.h:
src/api/schema.h:
src/api/table.h:
src/api/validation.h:
src/json/patch.h:
src/api/selector.h:
src/apiserver/apiserver.h:
src/base/clock.h:
src/base/log.h:
src/http/http.h:
src/store/store.h:
src/store/wcache.h:
src/pki/pki.h:
