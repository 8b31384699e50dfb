/* The client certificate's rotation deadline: 70-90% of its lifetime, as the kubelet's
 * jitteryDuration (src/agent/certmgr.c). */
#include "agent/certmgr.h"

#include <criterion/criterion.h>

Test(certmgr, deadline_is_70_to_90_percent_of_the_lifetime) {
    const int64_t nb = 1000, na = 1000 + 1000000;
    cr_expect_eq(kite_certmgr_deadline(nb, na, 0.0), nb + 700000);
    cr_expect_eq(kite_certmgr_deadline(nb, na, 0.5), nb + 800000);
    cr_expect_lt(kite_certmgr_deadline(nb, na, 0.999999), nb + 900000 + 1);
    cr_expect_eq(kite_certmgr_deadline(na, nb, 0.5), na); /* a certificate ending before it starts: now */
}
