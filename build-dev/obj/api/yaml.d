build-dev/obj/api/yaml.o: src/api/yaml.c src/api/yaml.h src/base/base.h \
 src/base/buf.h src/base/map.h
src/api/yaml.h:
src/base/base.h:
src/base/buf.h:
src/base/map.h:
