/* Encryption at rest of chosen key prefixes (store.h: struct kite_store_crypt), as
 * kube-apiserver's EncryptionConfiguration with an aesgcm provider: values under the prefixes
 * are sealed with AES-256-GCM (GnuTLS) before they reach SQLite and opened when read back, so
 * the database file never holds them in the clear; records in memory (the watch cache) hold
 * plaintext. A sealed value is "k8s:enc:aesgcm:v1:kite:" + a random 12-byte nonce + the
 * ciphertext + the 16-byte tag; the key's prefix is authenticated as associated data, so a
 * sealed value moved to another key does not open. A value without the header (written before
 * encryption was turned on) is read as it is, as kube-apiserver's identity fallback. */
#include "store/store-int.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>

#define HEADER "k8s:enc:aesgcm:v1:kite:"
#define HEADER_LEN (sizeof HEADER - 1)
#define NONCE_LEN 12
#define TAG_LEN 16

struct kite_store_crypt {
    gnutls_aead_cipher_hd_t aead;
    pthread_mutex_t mu; /* the handle is used from the writer and readers */
    char **prefixes;
    size_t n;
};

int kite_store_crypt_new(const unsigned char key[KITE_STORE_CRYPT_KEY_LEN], const char *const *prefixes,
                         struct kite_store_crypt **ret) {
    struct kite_store_crypt *c = kite_calloc(1, sizeof *c);
    gnutls_datum_t k = {(unsigned char *)key, KITE_STORE_CRYPT_KEY_LEN};
    if (gnutls_aead_cipher_init(&c->aead, GNUTLS_CIPHER_AES_256_GCM, &k) < 0) {
        free(c);
        return -EINVAL;
    }
    pthread_mutex_init(&c->mu, NULL);
    for (; prefixes && *prefixes; prefixes++) {
        c->prefixes = kite_realloc(c->prefixes, (c->n + 1) * sizeof *c->prefixes);
        c->prefixes[c->n++] = kite_strdup(*prefixes);
    }
    *ret = c;
    return 0;
}

void kite_store_crypt_free(struct kite_store_crypt *c) {
    if (!c) return;
    gnutls_aead_cipher_deinit(c->aead);
    pthread_mutex_destroy(&c->mu);
    for (size_t i = 0; i < c->n; i++) free(c->prefixes[i]);
    free(c->prefixes);
    free(c);
}

bool kite_store_crypt_applies(const struct kite_store_crypt *c, const char *key) {
    for (size_t i = 0; c && i < c->n; i++)
        if (kite_startswith(key, c->prefixes[i])) return true;
    return false;
}

int kite_store_crypt_seal(struct kite_store_crypt *c, const char *key, const void *plain, size_t len, char **ret, size_t *ret_len) {
    size_t out_len = HEADER_LEN + NONCE_LEN + len + TAG_LEN, ct_len = len + TAG_LEN;
    char *out = kite_malloc(out_len);
    memcpy(out, HEADER, HEADER_LEN);
    unsigned char *nonce = (unsigned char *)out + HEADER_LEN;
    if (gnutls_rnd(GNUTLS_RND_NONCE, nonce, NONCE_LEN) < 0) {
        free(out);
        return -EIO;
    }
    pthread_mutex_lock(&c->mu);
    int r = gnutls_aead_cipher_encrypt(c->aead, nonce, NONCE_LEN, key, strlen(key), TAG_LEN, plain, len,
                                       nonce + NONCE_LEN, &ct_len);
    pthread_mutex_unlock(&c->mu);
    if (r < 0) {
        free(out);
        return -EIO;
    }
    *ret = out;
    *ret_len = HEADER_LEN + NONCE_LEN + ct_len;
    return 0;
}

int kite_store_crypt_open(struct kite_store_crypt *c, const char *key, const void *sealed, size_t len, char **ret, size_t *ret_len) {
    if (len < HEADER_LEN || memcmp(sealed, HEADER, HEADER_LEN) != 0) {
        *ret = NULL; /* written in the clear: used as it is */
        return 0;
    }
    if (len < HEADER_LEN + NONCE_LEN + TAG_LEN) return -EBADMSG;
    const unsigned char *nonce = (const unsigned char *)sealed + HEADER_LEN;
    size_t ct_len = len - HEADER_LEN - NONCE_LEN, pt_len = ct_len;
    char *out = kite_malloc(ct_len + 1);
    pthread_mutex_lock(&c->mu);
    int r = gnutls_aead_cipher_decrypt(c->aead, nonce, NONCE_LEN, key, strlen(key), TAG_LEN, nonce + NONCE_LEN, ct_len,
                                       out, &pt_len);
    pthread_mutex_unlock(&c->mu);
    if (r < 0) {
        free(out);
        return -EBADMSG; /* another key, or damaged */
    }
    *ret = out;
    *ret_len = pt_len;
    return 0;
}

struct kite_record *kite_record_from_row(struct kite_store_crypt *c, const char *key, size_t key_len, const void *val,
                                    size_t len) {
    if (!kite_store_crypt_applies(c, key)) return kite_record_alloc(key, key_len, val, len);
    char *plain = NULL;
    size_t plain_len = 0;
    if (kite_store_crypt_open(c, key, val, len, &plain, &plain_len) < 0) return NULL;
    struct kite_record *r = plain ? kite_record_alloc(key, key_len, plain, plain_len) : kite_record_alloc(key, key_len, val, len);
    free(plain);
    return r;
}
