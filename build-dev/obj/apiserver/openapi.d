build-dev/obj/apiserver/openapi.o: src/apiserver/openapi.c \
 src/apiserver/internal.h src/api/registry.h src/api/schema.h \
 src/base/base.h src/api/table.h src/base/buf.h src/api/validation.h \
 src/json/patch.h src/api/selector.h src/apiserver/apiserver.h \
 src/base/clock.h src/base/log.h src/http/http.h src/store/store.h \
 src/store/wcache.h src/api/openapi.h
src/apiserver/internal.h:
src/api/registry.h:
src/api/schema.h:
src/base/base.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/patch.h:
src/api/selector.h:
src/apiserver/apiserver.h:
src/base/clock.h:
src/base/log.h:
src/http/http.h:
src/store/store.h:
src/store/wcache.h:
src/api/openapi.h:
