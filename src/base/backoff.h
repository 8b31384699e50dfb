/* Exponential backoff with jitter: initial, ×factor per failure, capped, each delay
 * spread by ±jitter (0.0–1.0) using a caller-seeded PRNG so tests are deterministic. */
#pragma once
#include "base/base.h"

struct kite_backoff {
    int64_t initial_ns, max_ns, current_ns;
    double factor, jitter;
    uint64_t rng;
};

void kite_backoff_init(struct kite_backoff *b, int64_t initial_ns, int64_t max_ns, double factor,
                       double jitter, uint64_t seed);
/* The next delay to wait, then grows the delay. */
int64_t kite_backoff_next(struct kite_backoff *b);
void kite_backoff_reset(struct kite_backoff *b);
/* The delay after `failures` consecutive failures as client-go's per-item exponential rate
 * limiter and the scheduler's pod back-off compute it: base x 2^failures, capped at max_ns
 * (no jitter; failures 0 = base). */
int64_t kite_backoff_exp(int64_t base_ns, int64_t max_ns, unsigned failures);
/* One item's next delay as client-go's flowcontrol.Backoff.Next (the kubelet's crash-loop and
 * image-pull back-offs), without its jitter: base for the first failure (prev_ns 0: none yet,
 * or reset), then twice prev_ns, at most max_ns. */
int64_t kite_backoff_step(int64_t prev_ns, int64_t base_ns, int64_t max_ns);
/* A uniformly distributed double in [0,1) from the xorshift state *rng. */
double kite_rand01(uint64_t *rng);
/* d spread by a sliding factor as Kubernetes' wait.Jitter: d + rand*factor*d. */
int64_t kite_jitter(int64_t d_ns, double factor, uint64_t *rng);
