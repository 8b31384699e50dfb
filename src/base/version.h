/* kite's version: a Kubernetes v1.32 server/kubelet version that tools parse as semver
 * (kubectl's dispatcher reads only /version's major/minor). */
#pragma once
#define KITE_VERSION "v1.32.0-kite.1"
