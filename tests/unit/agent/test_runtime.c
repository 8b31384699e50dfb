/* The runtime interface: the fake runtime and the process runtime. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "agent/runtime/runtime.h"
#include "base/base.h"
#include "test_nodestatus_util.h"

TestSuite(runtime, .fini = nst_cleanup);

static int cmp_name(const void *a, const void *b) {
    return strcmp(((const struct kite_image *)a)->names[0], ((const struct kite_image *)b)->names[0]);
}

Test(runtime, fake_version_images_and_errors) {
    struct kite_runtime *rt = kite_runtime_fake_new("1.2.3");
    cr_assert_str_eq(rt->ops->name, "fake");
    char *name = NULL, *version = NULL;
    cr_assert_eq(rt->ops->version(rt, &name, &version), 0);
    cr_assert_str_eq(name, "fake");
    cr_assert_str_eq(version, "1.2.3");
    free(name);
    free(version);

    struct kite_image *v = (void *)1;
    size_t n = 99;
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), 0);
    cr_assert_eq(n, 0);
    cr_assert_null(v);

    /* the fake copies what it is given: the caller's arrays may go away */
    char *names[] = {kite_strdup("a:1"), kite_strdup("a@sha256:00")};
    struct kite_image in[] = {{names, 2, 42}};
    kite_runtime_fake_set_images(rt, in, 1);
    free(names[0]);
    free(names[1]);
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(v[0].n_names, 2);
    cr_assert_str_eq(v[0].names[0], "a:1");
    cr_assert_str_eq(v[0].names[1], "a@sha256:00");
    cr_assert_eq(v[0].size_bytes, 42);
    kite_images_free(v, n);

    kite_runtime_fake_set_error(rt, -EIO);
    cr_assert_eq(rt->ops->version(rt, &name, &version), -EIO);
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), -EIO);
    kite_runtime_fake_set_error(rt, 0);
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), 0);
    kite_images_free(v, n);
    kite_runtime_free(rt);
    kite_runtime_free(NULL);

    rt = kite_runtime_fake_new(NULL);
    cr_assert_eq(rt->ops->version(rt, &name, &version), 0);
    cr_assert_str_eq(version, "0.0.0");
    free(name);
    free(version);
    kite_runtime_free(rt);
}

Test(runtime, process_version_and_images_dir) {
    struct kite_runtime *rt = NULL;
    cr_assert_eq(kite_runtime_process_new("", &rt), -EINVAL);
    cr_assert_eq(kite_runtime_process_new(NULL, &rt), -EINVAL);
    char *root = nst_tmpdir();
    cr_assert_eq(kite_runtime_process_new(root, &rt), 0);
    cr_assert_str_eq(rt->ops->name, "kite-process");
    char *name = NULL, *version = NULL;
    cr_assert_eq(rt->ops->version(rt, &name, &version), 0);
    cr_assert_str_eq(name, KITE_RUNTIME_PROCESS_NAME);
    cr_assert_str_eq(version, KITE_RUNTIME_PROCESS_VERSION);
    free(name);
    free(version);

    /* no images dir: no images, no error */
    struct kite_image *v = NULL;
    size_t n = 99;
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), 0);
    cr_assert_eq(n, 0);

    nst_write(root, "/images/docker.io%2Flibrary%2Fbusybox:1.36", "0123456789"); /* 10 bytes */
    nst_write(root, "/images/registry.k8s.io%2Fpause:3.10/layer1/a", "12345");
    nst_write(root, "/images/registry.k8s.io%2Fpause:3.10/layer2/b", "123");
    nst_write(root, "/images/registry.k8s.io%2Fpause:3.10/config.json", "{}");
    nst_write(root, "/images/bad%zz%2", "x");
    nst_write(root, "/images/.partial-download", "xxxxxxxx");
    cr_assert_eq(rt->ops->list_images(rt, &v, &n), 0);
    cr_assert_eq(n, 3);
    qsort(v, n, sizeof(*v), cmp_name);
    cr_assert_str_eq(v[0].names[0], "bad%zz%2", "a bad escape stays literal");
    cr_assert_eq(v[0].size_bytes, 1);
    cr_assert_str_eq(v[1].names[0], "docker.io/library/busybox:1.36");
    cr_assert_eq(v[1].size_bytes, 10);
    cr_assert_str_eq(v[2].names[0], "registry.k8s.io/pause:3.10");
    cr_assert_eq(v[2].size_bytes, 10, "sum of the files below the image dir");
    cr_assert_eq(v[2].n_names, 1);
    kite_images_free(v, n);
    kite_runtime_free(rt);
    nst_rmtree(root);
    free(root);
}
