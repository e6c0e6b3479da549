/*
 * The sk_reuseport program: for each new connection (a SYN, or a queued
 * connection migrating off a listener that is shut down), choose the worker
 * with ebpf/policy.h and hand the kernel that worker's listening socket.
 *
 * Returns SK_PASS always: with no socket selected the kernel hashes over the
 * group's listening sockets, so a missing entry or no eligible worker never
 * refuses a connection.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "ebpf/policy.h"

char LICENSE[] SEC("license") = "GPL";

/* One slot per (listen address, worker): group g's worker i at
 * g * SWS_EBPF_MAX_WORKERS + i. max_entries is set by the loader. */
struct {
    __uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
    __uint(max_entries, SWS_EBPF_MAX_WORKERS);
    __type(key, __u32);
    __type(value, __u64);
} sws_socks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __uint(map_flags, BPF_F_MMAPABLE);
    __type(key, __u32);
    __type(value, struct sws_ebpf_state);
} sws_load SEC(".maps");

/* The group the listener belongs to; -1 when it is none of ours. Every
 * field is read whatever the family: the verifier refuses a pointer into
 * the socket computed at run time. */
static __always_inline int group_of(const struct sws_ebpf_config *c, struct bpf_sock *sk)
{
    __u32 family = sk->family, port = sk->src_port, ip4 = sk->src_ip4;
    __u32 ip6[4] = { sk->src_ip6[0], sk->src_ip6[1], sk->src_ip6[2], sk->src_ip6[3] };
    int v4 = family == 2; /* AF_INET */
    /* Else clang folds the two loads back into one from sk + (v4 ? 24 : 28). */
    asm volatile("" : "+r"(ip4));
    asm volatile("" : "+r"(ip6[0]));
    for (__u32 g = 0; g < SWS_EBPF_MAX_GROUPS && g < c->ngroups; g++) {
        const struct sws_ebpf_group *gr = &c->groups[g];
        if (gr->family == family && gr->port == port && gr->addr[0] == (v4 ? ip4 : ip6[0]) &&
            gr->addr[1] == (v4 ? 0 : ip6[1]) && gr->addr[2] == (v4 ? 0 : ip6[2]) &&
            gr->addr[3] == (v4 ? 0 : ip6[3]))
            return (int)g;
    }
    return -1;
}

SEC("sk_reuseport/migrate")
int sws_select(struct sk_reuseport_md *ctx)
{
    __u32 zero = 0;
    struct sws_ebpf_state *s = bpf_map_lookup_elem(&sws_load, &zero);
    struct bpf_sock *sk = ctx->sk;
    if (s == NULL || sk == NULL)
        return SK_PASS;
    int group = group_of(&s->config, sk);
    if (group < 0)
        return SK_PASS;
    int slot = sws_ebpf_pick(s, ctx->hash, bpf_get_smp_processor_id(),
                             bpf_ktime_get_ns() / 1000000);
    if (slot < 0 || slot >= SWS_EBPF_MAX_WORKERS)
        return SK_PASS;
    __u32 key = (__u32)group * SWS_EBPF_MAX_WORKERS + (__u32)slot;
    if (bpf_sk_select_reuseport(ctx, &sws_socks, &key, 0) == 0)
        __sync_fetch_and_add(&s->w[slot].selected, 1);
    return SK_PASS;
}
