/* The history bound: past KITE_HISTORY_MAX revisions, housekeeping compacts back to the bound a
 * few seconds' writes at a time, not half the history at once (which stalled every write behind
 * tens of compaction steps at 9,000 writes/s). */
#include "apiserver/internal.h"

#include <criterion/criterion.h>

Test(history, nothing_to_compact_within_the_bound_and_its_slack) {
    cr_assert_eq(kite_apiserver_history_target(100, 0), 0);
    cr_assert_eq(kite_apiserver_history_target(KITE_HISTORY_MAX, 0), 0);
    cr_assert_eq(kite_apiserver_history_target(KITE_HISTORY_MAX + KITE_HISTORY_SLACK, 0), 0);
    cr_assert_eq(kite_apiserver_history_target(5 * KITE_HISTORY_MAX, 4 * KITE_HISTORY_MAX - KITE_HISTORY_SLACK), 0);
}

Test(history, past_it_compacts_back_to_the_bound_only) {
    int64_t compacted = 7000000;
    for (int64_t over = 1; over <= 1000000; over += 9973) {
        int64_t rev = compacted + KITE_HISTORY_MAX + KITE_HISTORY_SLACK + over;
        int64_t to = kite_apiserver_history_target(rev, compacted);
        cr_assert_eq(to, rev - KITE_HISTORY_MAX, "rev %lld: compacts to %lld", (long long)rev, (long long)to);
        cr_assert_eq(rev - to, KITE_HISTORY_MAX, "the bound's history is kept");
    }
    /* the step just past the slack is small: a few seconds of writes at 9,000/s, not 500,000 */
    int64_t rev = compacted + KITE_HISTORY_MAX + KITE_HISTORY_SLACK + 1;
    cr_assert_leq(kite_apiserver_history_target(rev, compacted) - compacted, KITE_HISTORY_SLACK + 1);
}
