/* The pod network over rtnetlink (net.h). The pod's side is configured from a short-lived
 * thread that enters the sandbox's network namespace: setns() on a thread moves only that
 * thread, and the netlink socket it opens there talks to that namespace; the agent's other
 * threads never leave the host's. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <net/if.h> /* before the linux/ headers, which then leave its definitions alone */
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent/runtime/net.h"
#include "base/base.h"

bool kite_net_valid_ifname(const char *name) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n >= IFNAMSIZ || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) return false;
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == ':' || *p <= ' ' || *p == 127) return false;
    return true;
}

struct nl {
    struct mnl_socket *sock;
    unsigned portid, seq;
    char buf[8192]; /* MNL_SOCKET_BUFFER_SIZE at most; it is not a constant */
};

static int nl_open(struct nl *nl) {
    nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
    if (!nl->sock) return -errno;
    if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
        int r = -errno;
        mnl_socket_close(nl->sock);
        nl->sock = NULL;
        return r;
    }
    nl->portid = mnl_socket_get_portid(nl->sock);
    nl->seq = (unsigned)time(NULL);
    return 0;
}

static void nl_close(struct nl *nl) {
    if (nl->sock) mnl_socket_close(nl->sock);
    nl->sock = NULL;
}

static struct nlmsghdr *nl_msg(struct nl *nl, uint16_t type, uint16_t flags) {
    struct nlmsghdr *h = mnl_nlmsg_put_header(nl->buf);
    h->nlmsg_type = type;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
    h->nlmsg_seq = ++nl->seq;
    return h;
}

/* Sends h and waits for the kernel's acknowledgement: 0 or its -errno. */
static int nl_talk(struct nl *nl, struct nlmsghdr *h) {
    if (mnl_socket_sendto(nl->sock, h, h->nlmsg_len) < 0) return -errno;
    unsigned seq = h->nlmsg_seq;
    for (;;) {
        ssize_t n = mnl_socket_recvfrom(nl->sock, nl->buf, sizeof nl->buf);
        if (n < 0) return errno == EINTR ? -EINTR : -errno;
        int r = mnl_cb_run(nl->buf, (size_t)n, seq, nl->portid, NULL, NULL);
        if (r == MNL_CB_ERROR) return -errno;
        if (r == MNL_CB_STOP) return 0;
    }
}

static struct ifinfomsg *put_ifinfo(struct nlmsghdr *h, int index, unsigned flags, unsigned change) {
    struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(h, sizeof(*ifi));
    ifi->ifi_family = AF_UNSPEC;
    ifi->ifi_index = index;
    ifi->ifi_flags = flags;
    ifi->ifi_change = change;
    return ifi;
}

static int link_up(struct nl *nl, int index) {
    struct nlmsghdr *h = nl_msg(nl, RTM_NEWLINK, 0);
    put_ifinfo(h, index, IFF_UP, IFF_UP);
    return nl_talk(nl, h);
}

static int add_addr(struct nl *nl, int index, uint32_t addr, int prefix) {
    struct nlmsghdr *h = nl_msg(nl, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
    struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(h, sizeof(*ifa));
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = (unsigned char)prefix;
    ifa->ifa_scope = RT_SCOPE_UNIVERSE;
    ifa->ifa_index = (unsigned)index;
    uint32_t bcast = addr | ~(~UINT32_C(0) << (32 - prefix));
    mnl_attr_put_u32(h, IFA_LOCAL, htonl(addr));
    mnl_attr_put_u32(h, IFA_ADDRESS, htonl(addr));
    mnl_attr_put_u32(h, IFA_BROADCAST, htonl(bcast));
    int r = nl_talk(nl, h);
    return r == -EEXIST ? 0 : r;
}

static int add_default_route(struct nl *nl, int index, uint32_t gw) {
    struct nlmsghdr *h = nl_msg(nl, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
    struct rtmsg *rt = mnl_nlmsg_put_extra_header(h, sizeof(*rt));
    rt->rtm_family = AF_INET;
    rt->rtm_table = RT_TABLE_MAIN;
    rt->rtm_protocol = RTPROT_BOOT;
    rt->rtm_scope = RT_SCOPE_UNIVERSE;
    rt->rtm_type = RTN_UNICAST;
    mnl_attr_put_u32(h, RTA_GATEWAY, htonl(gw));
    mnl_attr_put_u32(h, RTA_OIF, (uint32_t)index);
    int r = nl_talk(nl, h);
    return r == -EEXIST ? 0 : r;
}

static int del_link(struct nl *nl, const char *name) {
    struct nlmsghdr *h = nl_msg(nl, RTM_DELLINK, 0);
    put_ifinfo(h, 0, 0, 0);
    mnl_attr_put_strz(h, IFLA_IFNAME, name);
    int r = nl_talk(nl, h);
    return r == -ENODEV ? 0 : r;
}

static int fail(char **ret_error, int r, const char *what, const char *name) {
    if (ret_error) *ret_error = kite_asprintf("pod network: %s %s: %s", what, name, strerror(-r));
    return r;
}

static bool is_bridge(const char *name) {
    _cleanup_free_ char *p = kite_asprintf("/sys/class/net/%s/bridge", name);
    return access(p, F_OK) == 0;
}

int kite_net_bridge_ensure(const char *bridge, uint32_t gw, int prefix, char **ret_error) {
    if (!kite_net_valid_ifname(bridge)) return fail(ret_error, -EINVAL, "bridge name", bridge ? bridge : "");
    struct nl nl;
    int r = nl_open(&nl);
    if (r < 0) return fail(ret_error, r, "netlink socket for", bridge);
    int index = (int)if_nametoindex(bridge);
    if (!index) {
        struct nlmsghdr *h = nl_msg(&nl, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
        put_ifinfo(h, 0, 0, 0);
        mnl_attr_put_strz(h, IFLA_IFNAME, bridge);
        struct nlattr *info = mnl_attr_nest_start(h, IFLA_LINKINFO);
        mnl_attr_put_strz(h, IFLA_INFO_KIND, "bridge");
        mnl_attr_nest_end(h, info);
        r = nl_talk(&nl, h);
        if (r < 0 && r != -EEXIST) {
            nl_close(&nl);
            return fail(ret_error, r, "creating bridge", bridge);
        }
        index = (int)if_nametoindex(bridge);
    }
    if (!index || !is_bridge(bridge)) {
        nl_close(&nl);
        if (ret_error) *ret_error = kite_asprintf("pod network: %s exists and is not a bridge", bridge);
        return -EEXIST;
    }
    if ((r = add_addr(&nl, index, gw, prefix)) < 0) {
        nl_close(&nl);
        return fail(ret_error, r, "adding the gateway address to", bridge);
    }
    if ((r = link_up(&nl, index)) < 0) {
        nl_close(&nl);
        return fail(ret_error, r, "bringing up", bridge);
    }
    nl_close(&nl);
    return 0;
}

/* The pod's side, run by a thread inside the pod's network namespace. */
struct inside {
    int nsfd;
    uint32_t addr, gw;
    int prefix;
    int r;
    const char *step;
};

static void *configure_inside(void *arg) {
    struct inside *in = arg;
    struct nl nl = {0};
    int lo, eth;
    in->step = "entering the sandbox's network namespace";
    if (setns(in->nsfd, CLONE_NEWNET) < 0) {
        in->r = -errno;
        return NULL;
    }
    in->step = "netlink socket in the sandbox";
    if ((in->r = nl_open(&nl)) < 0) return NULL;
    in->step = "finding lo and " KITE_NET_POD_IFNAME;
    in->r = -ENODEV;
    if ((lo = (int)if_nametoindex("lo")) && (eth = (int)if_nametoindex(KITE_NET_POD_IFNAME))) {
        in->step = "bringing up lo";
        if ((in->r = link_up(&nl, lo)) == 0) {
            in->step = "adding the pod address";
            if ((in->r = add_addr(&nl, eth, in->addr, in->prefix)) == 0) {
                in->step = "bringing up " KITE_NET_POD_IFNAME;
                if ((in->r = link_up(&nl, eth)) == 0) {
                    in->step = "adding the default route";
                    in->r = add_default_route(&nl, eth, in->gw);
                }
            }
        }
    }
    nl_close(&nl);
    return NULL;
}

int kite_net_attach(const char *bridge, const char *host_if, const char *nspath, uint32_t addr, int prefix, uint32_t gw,
                    char **ret_error) {
    if (!kite_net_valid_ifname(host_if)) return fail(ret_error, -EINVAL, "interface name", host_if ? host_if : "");
    int br = (int)if_nametoindex(bridge);
    if (!br) return fail(ret_error, -ENODEV, "finding bridge", bridge);
    int nsfd = open(nspath, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) return fail(ret_error, -errno, "opening", nspath);
    struct nl nl;
    int r = nl_open(&nl);
    if (r < 0) {
        close(nsfd);
        return fail(ret_error, r, "netlink socket for", host_if);
    }
    /* one message makes the pair: the peer is born in the pod's namespace as eth0 */
    struct nlmsghdr *h = nl_msg(&nl, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
    put_ifinfo(h, 0, 0, 0);
    mnl_attr_put_strz(h, IFLA_IFNAME, host_if);
    mnl_attr_put_u32(h, IFLA_MASTER, (uint32_t)br);
    struct nlattr *info = mnl_attr_nest_start(h, IFLA_LINKINFO);
    mnl_attr_put_strz(h, IFLA_INFO_KIND, "veth");
    struct nlattr *data = mnl_attr_nest_start(h, IFLA_INFO_DATA);
    struct nlattr *peer = mnl_attr_nest_start(h, VETH_INFO_PEER);
    put_ifinfo(h, 0, 0, 0);
    mnl_attr_put_strz(h, IFLA_IFNAME, KITE_NET_POD_IFNAME);
    mnl_attr_put_u32(h, IFLA_NET_NS_FD, (uint32_t)nsfd);
    mnl_attr_nest_end(h, peer);
    mnl_attr_nest_end(h, data);
    mnl_attr_nest_end(h, info);
    if ((r = nl_talk(&nl, h)) < 0) {
        nl_close(&nl);
        close(nsfd);
        return fail(ret_error, r, "creating the veth pair", host_if);
    }
    int index = (int)if_nametoindex(host_if);
    r = index ? link_up(&nl, index) : -ENODEV;
    if (r < 0) fail(ret_error, r, "bringing up", host_if);
    if (r == 0) {
        struct inside in = {.nsfd = nsfd, .addr = addr, .gw = gw, .prefix = prefix};
        pthread_t t;
        r = -pthread_create(&t, NULL, configure_inside, &in);
        if (r == 0) {
            pthread_join(t, NULL);
            r = in.r;
        }
        if (r < 0 && ret_error)
            *ret_error = kite_asprintf("pod network: %s: %s", in.step ? in.step : "starting a thread", strerror(-r));
    }
    if (r < 0) del_link(&nl, host_if);
    nl_close(&nl);
    close(nsfd);
    return r;
}

int kite_net_detach(const char *host_if) {
    if (!kite_net_valid_ifname(host_if)) return -EINVAL;
    struct nl nl;
    int r = nl_open(&nl);
    if (r < 0) return r;
    r = del_link(&nl, host_if);
    nl_close(&nl);
    return r;
}

int kite_net_bridge_claim(const char *bridge, const char *root_dir, int *ret_fd, char **ret_error) {
    if (mkdir(KITE_NET_LOCK_DIR, 0700) < 0 && errno != EEXIST) {
        int r = -errno;
        if (ret_error) *ret_error = kite_asprintf("creating %s: %s", KITE_NET_LOCK_DIR, strerror(-r));
        return r;
    }
    _cleanup_free_ char *path = kite_asprintf("%s/bridge-%s.lock", KITE_NET_LOCK_DIR, bridge);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        int r = -errno;
        if (ret_error) *ret_error = kite_asprintf("opening %s: %s", path, strerror(-r));
        return r;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
        char holder[512] = "";
        ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
        holder[n > 0 ? n : 0] = 0;
        holder[strcspn(holder, "\n")] = 0;
        if (ret_error)
            *ret_error = r == -EBUSY ? kite_asprintf("the pod bridge %s is in use by another node agent (%s); give this "
                                                     "one its own with --pod-bridge and --pod-cidr",
                                                     bridge, *holder ? holder : "unknown")
                                     : kite_asprintf("locking %s: %s", path, strerror(-r));
        close(fd);
        return r;
    }
    _cleanup_free_ char *me = kite_asprintf("pid %d, root dir %s\n", (int)getpid(), root_dir ? root_dir : "?");
    if (ftruncate(fd, 0) < 0 || pwrite(fd, me, strlen(me), 0) < 0) {
        /* the claim holds without the note: only the message naming the holder is lost */
    }
    *ret_fd = fd;
    return 0;
}
