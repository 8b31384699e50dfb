build-dev/obj/api/fieldset.o: src/api/fieldset.c src/api/fieldset.h \
 src/api/schema.h src/base/base.h src/json/patch.h src/api/registry.h \
 src/api/table.h src/base/buf.h src/api/validation.h src/json/parse.h
src/api/fieldset.h:
src/api/schema.h:
src/base/base.h:
src/json/patch.h:
src/api/registry.h:
src/api/table.h:
src/base/buf.h:
src/api/validation.h:
src/json/parse.h:
