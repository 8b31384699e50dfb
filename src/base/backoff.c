#include "base/backoff.h"

double kite_rand01(uint64_t *rng) {
    uint64_t x = *rng ? *rng : 0x9E3779B97F4A7C15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *rng = x;
    return (double)(x >> 11) / (double)(1ull << 53);
}

int64_t kite_jitter(int64_t d, double factor, uint64_t *rng) {
    return d + (int64_t)(kite_rand01(rng) * factor * (double)d);
}

void kite_backoff_init(struct kite_backoff *b, int64_t initial_ns, int64_t max_ns, double factor,
                       double jitter, uint64_t seed) {
    *b = (struct kite_backoff){initial_ns, max_ns, initial_ns, factor, jitter, seed};
}

int64_t kite_backoff_next(struct kite_backoff *b) {
    int64_t d = b->current_ns;
    if (b->jitter > 0) d = d - (int64_t)(b->jitter * (double)d) + (int64_t)(2 * b->jitter * (double)d * kite_rand01(&b->rng));
    int64_t next = (int64_t)((double)b->current_ns * b->factor);
    b->current_ns = next > b->max_ns ? b->max_ns : next;
    return d > b->max_ns ? b->max_ns : d;
}

void kite_backoff_reset(struct kite_backoff *b) { b->current_ns = b->initial_ns; }

int64_t kite_backoff_exp(int64_t base_ns, int64_t max_ns, unsigned failures) {
    int64_t d = base_ns;
    for (unsigned i = 0; i < failures && d < max_ns; i++) d *= 2;
    return KITE_MIN(d, max_ns);
}

int64_t kite_backoff_step(int64_t prev_ns, int64_t base_ns, int64_t max_ns) {
    return prev_ns > 0 ? KITE_MIN(kite_sat_mul(prev_ns, 2), max_ns) : base_ns;
}
