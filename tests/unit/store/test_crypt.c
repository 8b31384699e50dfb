#include <criterion/criterion.h>

#include "store/store-int.h"

static const unsigned char KEY[KITE_STORE_CRYPT_KEY_LEN] = "0123456789abcdef0123456789abcdef";

Test(crypt, seals_only_its_prefixes_and_opens_what_it_sealed) {
    const char *prefixes[] = {"/registry/secrets/", NULL};
    struct kite_store_crypt *c;
    cr_assert_eq(kite_store_crypt_new(KEY, prefixes, &c), 0);
    cr_assert(kite_store_crypt_applies(c, "/registry/secrets/default/s"));
    cr_assert_not(kite_store_crypt_applies(c, "/registry/configmaps/default/s"));
    cr_assert_not(kite_store_crypt_applies(NULL, "/registry/secrets/default/s"));
    const char *plain = "{\"data\":{\"k\":\"dmFsdWU=\"}}";
    char *sealed, *opened;
    size_t sl, ol;
    cr_assert_eq(kite_store_crypt_seal(c, "/registry/secrets/default/s", plain, strlen(plain), &sealed, &sl), 0);
    cr_assert(memmem(sealed, sl, "dmFsdWU=", 8) == NULL);
    cr_assert(memcmp(sealed, "k8s:enc:aesgcm:v1:kite:", 23) == 0);
    cr_assert_eq(kite_store_crypt_open(c, "/registry/secrets/default/s", sealed, sl, &opened, &ol), 0);
    cr_assert_eq(ol, strlen(plain));
    cr_assert(memcmp(opened, plain, ol) == 0);
    free(opened);
    /* bound to its key: a sealed value moved to another key does not open */
    cr_assert_eq(kite_store_crypt_open(c, "/registry/secrets/default/t", sealed, sl, &opened, &ol), -EBADMSG);
    /* a flipped byte does not open */
    sealed[sl - 1] ^= 1;
    cr_assert_eq(kite_store_crypt_open(c, "/registry/secrets/default/s", sealed, sl, &opened, &ol), -EBADMSG);
    free(sealed);
    /* a value written before encryption was turned on reads as it is */
    opened = (char *)1;
    cr_assert_eq(kite_store_crypt_open(c, "/registry/secrets/default/s", plain, strlen(plain), &opened, &ol), 0);
    cr_assert_null(opened);
    kite_store_crypt_free(c);
}

Test(crypt, another_key_does_not_open) {
    const char *prefixes[] = {"/s/", NULL};
    unsigned char other[KITE_STORE_CRYPT_KEY_LEN];
    memcpy(other, KEY, sizeof other);
    other[0] ^= 1;
    struct kite_store_crypt *a, *b;
    cr_assert_eq(kite_store_crypt_new(KEY, prefixes, &a), 0);
    cr_assert_eq(kite_store_crypt_new(other, prefixes, &b), 0);
    char *sealed, *opened;
    size_t sl, ol;
    cr_assert_eq(kite_store_crypt_seal(a, "/s/x", "hello", 5, &sealed, &sl), 0);
    cr_assert_eq(kite_store_crypt_open(b, "/s/x", sealed, sl, &opened, &ol), -EBADMSG);
    free(sealed);
    kite_store_crypt_free(a);
    kite_store_crypt_free(b);
}
