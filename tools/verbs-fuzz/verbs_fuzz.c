// SPDX-License-Identifier: GPL-2.0
/*
 * verbs_fuzz: a hostile user of one RDMA device of the rxe ABI (roxe, rdma_rxe).
 *
 *   verbs_fuzz -d DEV -g GIDIDX -t SECONDS [-s SEED] [--packets [--inject-if IF]
 *              [--pkt-src A.B.C.D] [--pps N]] [--selftest]
 *
 * For SECONDS, a seeded loop of random actions on DEV: objects created and destroyed with
 * random attributes (PDs, MRs normal and ODP, MWs of both types, CQs, QPs of every type, SRQs,
 * AHs), random QP transitions (RC and UC QPs connected to each other in loopback through the
 * device's own GID), random work requests (every opcode, keys of live and dead objects), CQ
 * polling and events, and random bytes written into the rings the rxe ABI maps into the process
 * (SQ, RQ, SRQ, CQ), each followed by a doorbell. With --packets a child process sends random
 * and mutated RoCEv2 packets (many with a valid ICRC) to UDP port 4791 of the device's IPv4
 * address: as Ethernet frames on --inject-if (the peer of a veth carrying the device, so they
 * arrive on the device's netdev), or else through a raw IP socket.
 *
 * Every failing verb is expected and counted, never fatal. The process itself must not crash:
 * it only hands the provider (librxe) pointers to live objects, registers writable memory only
 * inside its own reservation, and puts back the ring header fields the provider trusts
 * (element size, index mask, its own index) after each ring corruption. At the end everything
 * is destroyed and the counts are printed. Exit status: 0, or 1 when something that must work
 * did not (an object that cannot be destroyed once nothing uses it, a ring that does not fit
 * its mapping, the packet child dying), 2 on usage errors.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_user_rxe.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static void usage(void) __attribute__((noreturn));

/* ---- PRNG (xoshiro256**, seeded by splitmix64) -------------------------------------------- */

struct rng {
	uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void rng_seed(struct rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return res;
}

static struct rng R; /* the main process's */

static uint64_t r64(void) { return rng_next(&R); }
static uint32_t r32(void) { return (uint32_t)rng_next(&R); }
/* Uniform in [0, n); 0 when n is 0. */
static uint64_t rn(uint64_t n) { return n ? r64() % n : 0; }
/* True with probability pct percent. */
static int pct(unsigned int p) { return rn(100) < p; }

static void rfill(struct rng *r, void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n >= 8) {
		uint64_t v = rng_next(r);

		memcpy(p, &v, 8);
		p += 8;
		n -= 8;
	}
	if (n) {
		uint64_t v = rng_next(r);

		memcpy(p, &v, n);
	}
}

/* A 32-bit value a fuzzer likes: edges, powers of two around them, a limit, or anything. */
static uint32_t interesting32(uint32_t limit)
{
	static const uint32_t v[] = { 0, 1, 2, 3, 4, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256,
				      511, 512, 1023, 1024, 4095, 4096, 4097, 65535, 65536,
				      0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff };

	switch (rn(6)) {
	case 0: return limit - 1;
	case 1: return limit;
	case 2: return limit + 1;
	case 3: return r32();
	default: return v[rn(ARRAY_SIZE(v))];
	}
}

/* ---- statistics ------------------------------------------------------------------------- */

enum verb {
	V_ALLOC_PD, V_DEALLOC_PD, V_REG_MR, V_REG_MR_ODP, V_REG_MR_IMPLICIT, V_DEREG_MR, V_REREG_MR,
	V_ADVISE_MR, V_ALLOC_MW, V_DEALLOC_MW, V_BIND_MW, V_CREATE_CQ, V_DESTROY_CQ, V_RESIZE_CQ,
	V_POLL_CQ, V_REQ_NOTIFY_CQ, V_GET_CQ_EVENT, V_GET_ASYNC_EVENT, V_CREATE_QP, V_DESTROY_QP,
	V_MODIFY_QP, V_MODIFY_QP_CONNECT, V_QUERY_QP, V_CREATE_SRQ, V_DESTROY_SRQ, V_MODIFY_SRQ,
	V_QUERY_SRQ, V_CREATE_AH, V_DESTROY_AH, V_POST_SEND, V_POST_RECV, V_POST_SRQ_RECV,
	V_QUERY_DEVICE, V_QUERY_PORT, V_QUERY_GID, V_QUERY_PKEY, V_RING_SQ, V_RING_RQ, V_RING_SRQ,
	V_RING_CQ, V_MEM_REMAP, V_MEM_PROTECT, V_MEM_DONTNEED, V_MEM_SCRIBBLE, NVERB
};

static const char *const verb_name[NVERB] = {
	"alloc_pd", "dealloc_pd", "reg_mr", "reg_mr(odp)", "reg_mr(implicit odp)", "dereg_mr",
	"rereg_mr", "advise_mr", "alloc_mw", "dealloc_mw", "bind_mw(type 1)", "create_cq",
	"destroy_cq", "resize_cq", "poll_cq", "req_notify_cq", "get_cq_event", "get_async_event",
	"create_qp", "destroy_qp", "modify_qp(random)", "modify_qp(next state)", "query_qp",
	"create_srq", "destroy_srq", "modify_srq", "query_srq", "create_ah", "destroy_ah",
	"post_send", "post_recv", "post_srq_recv", "query_device", "query_port", "query_gid",
	"query_pkey", "ring:sq+doorbell", "ring:rq", "ring:srq", "ring:cq", "mem:remap",
	"mem:mprotect", "mem:madv_dontneed", "mem:scribble",
};

#define NERRNO 160
static uint64_t calls[NVERB], fails[NVERB];
static uint32_t errs[NVERB][NERRNO];
static uint64_t wc_status[32], async_type[32], total_actions;
static int findings;

static void finding(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("FINDING: ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	findings++;
}

/* Records one call: rc 0 is success, else an errno (negative values are folded). */
static int stat_rc(enum verb v, int rc)
{
	calls[v]++;
	if (rc) {
		int e = rc < 0 ? -rc : rc;

		fails[v]++;
		errs[v][e < NERRNO ? e : 0]++;
	}
	return rc;
}

static int stat_ptr(enum verb v, const void *p)
{
	return stat_rc(v, p ? 0 : (errno ? errno : EIO));
}

/* Recent actions, printed if the run is stopped from outside (a hang in a verb). */
static const char *trace[64];
static unsigned int trace_pos;

static void note(const char *what)
{
	trace[trace_pos++ % ARRAY_SIZE(trace)] = what;
}

/* ---- the device and the process's memory --------------------------------------------------- */

static struct ibv_context *ctx;
static struct ibv_device_attr dattr;
static struct ibv_port_attr pattr;
static union ibv_gid own_gid;
static int gid_index;
static struct ibv_comp_channel *chan;
static uint32_t max_gid_index = 16;

/*
 * One reservation holds every byte the device may write: RDMA WRITEs, READ responses, receives
 * and atomics land only in MRs with write rights, and those are registered only inside it.
 * Layout: guard (PROT_NONE), the arena (pinned MRs, 1 MiB chunks), guard, the ODP area (16 MiB
 * chunks, touched only on demand), guard. Chunks are remapped, protected and dropped, never
 * unmapped: the addresses stay ours, so an ODP MR never follows them into foreign memory.
 */
#define RES_SIZE (1ULL << 30)
#define ARENA_OFF (64ULL << 20)
#define ARENA_SIZE (32ULL << 20)
#define ARENA_CHUNK (1ULL << 20)
#define ODP_OFF (256ULL << 20)
#define ODP_SIZE (512ULL << 20)
#define ODP_CHUNK (16ULL << 20)
#define NARENA (ARENA_SIZE / ARENA_CHUNK)
#define NODP (ODP_SIZE / ODP_CHUNK)

static uint8_t *res;
static int arena_prot[NARENA], odp_prot[NODP]; /* PROT_* of each chunk */

/*
 * Address space for ODP registrations of every size, 4 KiB to 2 TiB: PROT_NONE and never
 * mapped, so it costs nothing and no access through such an MR can succeed, while the RDMA
 * core's page tables for it are what the device's ODP budget bounds (an unprivileged process
 * may not make the kernel allocate them without limit). Read rights only: it lies outside the
 * reservation.
 */
#define WIDE_SIZE (2ULL << 40)
static uint8_t *wide;

/* Inline data is copied by the provider from these bytes: never registered, never unmapped. */
static uint8_t scratch[65536];

static int in_reservation(uint64_t addr, uint64_t len)
{
	uint64_t lo = (uintptr_t)res, hi = lo + RES_SIZE;

	return addr >= lo && len <= hi - addr;
}

/* ---- objects ------------------------------------------------------------------------------ */

#define MAX_PD 6
#define MAX_MR 32
#define MAX_MW 16
#define MAX_CQ 16
#define MAX_QP 24
#define MAX_SRQ 8
#define MAX_AH 16
#define MAX_DEAD 64

enum ring_kind { RING_SQ, RING_RQ, RING_SRQ, RING_CQ };

struct ring {
	uint8_t *addr; /* NULL: not known (no ring chaos then) */
	size_t size;
	uint32_t log2, mask; /* the header as the kernel published it */
};

struct o_pd {
	struct ibv_pd *pd;
};

struct o_mr {
	struct ibv_mr *mr;
	int pd;
	uint64_t addr, len;
	unsigned int access;
};

struct o_mw {
	struct ibv_mw *mw;
	int pd;
	uint32_t rkey; /* the last rkey we asked a bind for */
};

struct o_cq {
	struct ibv_cq *cq;
	int unusable; /* the provider lost its ring (failed remap): never poll it */
	struct ring ring;
};

struct o_srq {
	struct ibv_srq *srq;
	int pd, unusable;
	uint32_t max_sge;
	struct ring ring;
};

struct o_qp {
	struct ibv_qp *qp;
	int pd, scq, rcq, srq;
	enum ibv_qp_type type;
	uint32_t max_send_sge, max_recv_sge, max_inline, sq_psn, rq_psn;
	struct ring sq, rq;
};

struct o_ah {
	struct ibv_ah *ah;
	int pd;
};

static struct o_pd pds[MAX_PD];
static struct o_mr mrs[MAX_MR];
static struct o_mw mws[MAX_MW];
static struct o_cq cqs[MAX_CQ];
static struct o_qp qps[MAX_QP];
static struct o_srq srqs[MAX_SRQ];
static struct o_ah ahs[MAX_AH];

/* Keys and QP numbers of destroyed objects, to be used again. */
static uint32_t dead_keys[MAX_DEAD], dead_qpns[MAX_DEAD];
static unsigned int ndead_keys, ndead_qpns;

static void bury_key(uint32_t k) { dead_keys[ndead_keys++ % MAX_DEAD] = k; }
static void bury_qpn(uint32_t q) { dead_qpns[ndead_qpns++ % MAX_DEAD] = q; }

/* Index of a random live entry of an object array, or -1. */
#define PICK_LIVE(arr, field)                                                     \
	({                                                                         \
		int _n = 0, _pick = -1;                                            \
		for (int _i = 0; _i < (int)ARRAY_SIZE(arr); _i++)                  \
			if ((arr)[_i].field && rn(++_n) == 0)                      \
				_pick = _i;                                        \
		_pick;                                                             \
	})
#define PICK_FREE(arr, field)                                                     \
	({                                                                         \
		int _n = 0, _pick = -1;                                            \
		for (int _i = 0; _i < (int)ARRAY_SIZE(arr); _i++)                  \
			if (!(arr)[_i].field && rn(++_n) == 0)                     \
				_pick = _i;                                        \
		_pick;                                                             \
	})
#define COUNT_LIVE(arr, field)                                                    \
	({                                                                         \
		int _n = 0;                                                        \
		for (int _i = 0; _i < (int)ARRAY_SIZE(arr); _i++)                  \
			_n += !!(arr)[_i].field;                                   \
		_n;                                                                \
	})

/* ---- hints shared with the packet child ----------------------------------------------------- */

struct hints {
	volatile uint32_t stop;
	volatile uint32_t nqp, nkey;
	struct {
		uint32_t qpn, type, sq_psn, rq_psn;
	} qp[MAX_QP];
	struct {
		uint64_t addr, len;
		uint32_t rkey;
	} key[MAX_MR + MAX_MW];
	volatile uint64_t sent, sent_icrc_ok, send_errors;
};

static struct hints *hints;

static void hints_update(void)
{
	uint32_t n = 0;

	if (!hints)
		return;
	for (int i = 0; i < MAX_QP; i++) {
		if (!qps[i].qp)
			continue;
		hints->qp[n].qpn = qps[i].qp->qp_num;
		hints->qp[n].type = qps[i].type;
		hints->qp[n].sq_psn = qps[i].sq_psn;
		hints->qp[n].rq_psn = qps[i].rq_psn;
		n++;
	}
	hints->nqp = n;
	n = 0;
	for (int i = 0; i < MAX_MR; i++) {
		if (!mrs[i].mr)
			continue;
		hints->key[n].addr = mrs[i].addr;
		hints->key[n].len = mrs[i].len;
		hints->key[n].rkey = mrs[i].mr->rkey;
		n++;
	}
	for (int i = 0; i < MAX_MW; i++) {
		if (!mws[i].mw)
			continue;
		hints->key[n].addr = (uintptr_t)res + ARENA_OFF;
		hints->key[n].len = ARENA_SIZE;
		hints->key[n].rkey = mws[i].rkey;
		n++;
	}
	hints->nkey = n;
}

/* ---- random keys, addresses and QP numbers ---------------------------------------------- */

static uint32_t any_lkey(void)
{
	int i;

	switch (rn(10)) {
	case 0: return ndead_keys ? dead_keys[rn(ndead_keys < MAX_DEAD ? ndead_keys : MAX_DEAD)] : r32();
	case 1: return interesting32(0);
	default:
		i = PICK_LIVE(mrs, mr);
		return i >= 0 ? mrs[i].mr->lkey : r32();
	}
}

static uint32_t any_rkey(void)
{
	int i;

	switch (rn(10)) {
	case 0: return ndead_keys ? dead_keys[rn(ndead_keys < MAX_DEAD ? ndead_keys : MAX_DEAD)] : r32();
	case 1: return interesting32(0);
	case 2: case 3:
		i = PICK_LIVE(mws, mw);
		return i >= 0 ? mws[i].rkey : r32();
	default:
		i = PICK_LIVE(mrs, mr);
		return i >= 0 ? mrs[i].mr->rkey : r32();
	}
}

/* An address for an SGE or a remote access: inside a live MR mostly, near or past its edges
 * sometimes, anything now and then. */
static uint64_t any_addr(uint64_t *room)
{
	int i = PICK_LIVE(mrs, mr);
	uint64_t a;

	*room = 4096;
	if (i < 0 || pct(8))
		return pct(50) ? r64() : (uintptr_t)res + ARENA_OFF + rn(ARENA_SIZE);
	if (mrs[i].len == 0 || mrs[i].len > (1ULL << 40))
		return mrs[i].addr + rn(1 << 20);
	switch (rn(10)) {
	case 0: a = mrs[i].addr - rn(4096) - 1; break;
	case 1: a = mrs[i].addr + mrs[i].len - rn(64); break;
	case 2: a = mrs[i].addr + mrs[i].len + rn(4096); break;
	default: a = mrs[i].addr + rn(mrs[i].len); break;
	}
	*room = mrs[i].addr + mrs[i].len > a ? mrs[i].addr + mrs[i].len - a : 64;
	return a;
}

/* A length: mostly small, sometimes up to the room there is, sometimes absurd. */
static uint32_t any_len(uint64_t room)
{
	switch (rn(20)) {
	case 0: return 0;
	case 1: return interesting32(dattr.max_mr_size > 0xffffffffULL ? 0x800000 : (uint32_t)dattr.max_mr_size);
	case 2: return (uint32_t)rn(room > (4 << 20) ? (4 << 20) : room + 1);
	case 3: case 4: return (uint32_t)rn(65537);
	default: return (uint32_t)rn(4097);
	}
}

static uint32_t any_qpn(void)
{
	int i;

	switch (rn(10)) {
	case 0: return ndead_qpns ? dead_qpns[rn(ndead_qpns < MAX_DEAD ? ndead_qpns : MAX_DEAD)] : r32();
	case 1: return rn(2) ? (uint32_t)rn(32) : 0xffffff;
	case 2: return r32() & (pct(80) ? 0xffffff : 0xffffffff);
	default:
		i = PICK_LIVE(qps, qp);
		return i >= 0 ? qps[i].qp->qp_num : (uint32_t)rn(64);
	}
}

static unsigned int any_access(void)
{
	static const unsigned int bits[] = {
		IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ,
		IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_MW_BIND, IBV_ACCESS_ZERO_BASED,
		IBV_ACCESS_FLUSH_GLOBAL, IBV_ACCESS_FLUSH_PERSISTENT, IBV_ACCESS_RELAXED_ORDERING,
	};
	unsigned int a = 0;

	if (pct(40))
		return IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC | (pct(50) ? IBV_ACCESS_MW_BIND : 0);
	for (unsigned int i = 0; i < ARRAY_SIZE(bits); i++)
		if (pct(35))
			a |= bits[i];
	if (pct(5))
		a |= 1u << rn(32);
	return a;
}

#define WRITE_RIGHTS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

/* ---- rings -------------------------------------------------------------------------------- */

struct mapent {
	uintptr_t start;
	size_t size;
};

#define MAX_MAPS 512
static struct mapent maps_before[MAX_MAPS];
static int nmaps_before;

static int read_uverbs_maps(struct mapent *out, int max)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (!strstr(line, "/dev/infiniband/uverbs"))
			continue;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && n < max) {
			out[n].start = lo;
			out[n].size = hi - lo;
			n++;
		}
	}
	fclose(f);
	return n;
}

static void maps_snapshot(void)
{
	nmaps_before = read_uverbs_maps(maps_before, MAX_MAPS);
}

/* The uverbs mappings that appeared since maps_snapshot(), at most max, smallest element
 * first. Returns how many, and in *gone whether any mapping of the snapshot disappeared. */
static int maps_new(struct ring *out, int max, int *gone)
{
	struct mapent now[MAX_MAPS];
	int n = read_uverbs_maps(now, MAX_MAPS), k = 0;

	*gone = 0;
	for (int i = 0; i < nmaps_before; i++) {
		int found = 0;

		for (int j = 0; j < n; j++)
			found |= now[j].start == maps_before[i].start && now[j].size == maps_before[i].size;
		*gone |= !found;
	}
	for (int j = 0; j < n && k < max; j++) {
		int old = 0;

		for (int i = 0; i < nmaps_before; i++)
			old |= now[j].start == maps_before[i].start && now[j].size == maps_before[i].size;
		if (old)
			continue;
		out[k].addr = (uint8_t *)now[j].start;
		out[k].size = now[j].size;
		k++;
	}
	return k;
}

/* Reads a new ring's header. A header that does not fit its mapping would send the provider
 * itself out of bounds: reported, and the ring is not used. */
static int ring_init(struct ring *r, const char *what)
{
	struct rxe_queue_buf *q = (struct rxe_queue_buf *)r->addr;
	uint64_t need;

	if (!r->addr)
		return 0;
	if (r->size < sizeof(*q)) {
		finding("%s ring mapping of %zu bytes is smaller than its header", what, r->size);
		r->addr = NULL;
		return -1;
	}
	r->log2 = q->log2_elem_size;
	r->mask = q->index_mask;
	need = r->log2 < 32 ? sizeof(*q) + ((uint64_t)r->mask + 1) * (1ULL << r->log2) : ~0ULL;
	if (need > r->size || ((uint64_t)r->mask & ((uint64_t)r->mask + 1))) {
		finding("%s ring header (log2 elem %u, mask %#x) does not fit its %zu-byte mapping",
			what, r->log2, r->mask, r->size);
		r->addr = NULL;
		return -1;
	}
	return 0;
}

/* ---- events ---------------------------------------------------------------------------------- */

/* Reads and acknowledges every pending completion and async event (libibverbs waits at destroy
 * for the events it handed out to be acknowledged; events never read are dropped by the
 * kernel at destroy and not waited for). */
static void drain_events(void)
{
	for (int i = 0; i < 256; i++) {
		struct ibv_cq *ecq;
		void *ectx;

		if (ibv_get_cq_event(chan, &ecq, &ectx))
			break;
		stat_rc(V_GET_CQ_EVENT, 0);
		ibv_ack_cq_events(ecq, 1);
	}
	for (int i = 0; i < 256; i++) {
		struct ibv_async_event ev;

		if (ibv_get_async_event(ctx, &ev))
			break;
		stat_rc(V_GET_ASYNC_EVENT, 0);
		async_type[(unsigned int)ev.event_type < 32 ? ev.event_type : 31]++;
		ibv_ack_async_event(&ev);
	}
}

/* ---- object actions ------------------------------------------------------------------------ */

static void act_alloc_pd(void)
{
	int i = PICK_FREE(pds, pd);

	if (i < 0)
		return;
	note("alloc_pd");
	errno = 0;
	pds[i].pd = ibv_alloc_pd(ctx);
	stat_ptr(V_ALLOC_PD, pds[i].pd);
}

static void act_dealloc_pd(void)
{
	int i = PICK_LIVE(pds, pd);

	if (i < 0)
		return;
	note("dealloc_pd");
	/* The kernel refuses while anything uses it (EBUSY): then it stays. */
	if (!stat_rc(V_DEALLOC_PD, ibv_dealloc_pd(pds[i].pd)))
		pds[i].pd = NULL;
}

static void act_reg_mr(void)
{
	int i = PICK_FREE(mrs, mr), p = PICK_LIVE(pds, pd), r = (int)rn(100);
	uint64_t base = (uintptr_t)res, addr, len, iova;
	unsigned int access = any_access();
	enum verb v = V_REG_MR;
	struct ibv_mr *mr;

	if (i < 0 || p < 0)
		return;
	if (r < 50) { /* the arena, edges and all */
		addr = base + ARENA_OFF + (pct(70) ? rn(NARENA) * ARENA_CHUNK : rn(ARENA_SIZE));
		switch (rn(8)) {
		case 0: len = 0; break;
		case 1: len = base + ARENA_OFF + ARENA_SIZE - addr + rn(2) * 4096; break;
		case 2: len = 1ULL << (20 + rn(24)); break; /* into the guard and past it */
		default: len = 1 + rn(pct(80) ? 65536 : (4ULL << 20)); break;
		}
	} else if (r < 68) { /* ODP: the ODP area, any size within the reservation */
		access |= IBV_ACCESS_ON_DEMAND;
		v = V_REG_MR_ODP;
		addr = base + ODP_OFF + (pct(50) ? rn(NODP) * ODP_CHUNK : rn(ODP_SIZE));
		len = pct(30) ? base + RES_SIZE - addr : 1 + rn(pct(50) ? (1 << 20) : ODP_SIZE);
		if (pct(10)) { /* or the arena, whose chunks get remapped under it */
			addr = base + ARENA_OFF + rn(ARENA_SIZE);
			len = 1 + rn(base + ARENA_OFF + ARENA_SIZE - addr);
		} else if (wide && pct(25)) { /* or any size up to 2 TiB of unmapped space */
			len = 1ULL << (12 + rn(30));
			addr = (uintptr_t)wide + (rn(WIDE_SIZE - len + 1) & ~4095ULL);
		}
	} else if (r < 72) { /* implicit ODP: the whole address space, so read rights only */
		access = (access | IBV_ACCESS_ON_DEMAND) & ~WRITE_RIGHTS;
		v = V_REG_MR_IMPLICIT;
		addr = 0;
		len = SIZE_MAX;
	} else if (r < 82) { /* a ring of ours: a device mapping */
		int q = PICK_LIVE(qps, qp);

		if (q < 0 || !qps[q].sq.addr)
			return;
		addr = (uintptr_t)qps[q].sq.addr + (pct(20) ? rn(qps[q].sq.size) : 0);
		len = pct(20) ? rn(qps[q].sq.size * 2 + 1) : qps[q].sq.size;
	} else if (r < 90) { /* the guard: PROT_NONE */
		addr = base + rn(ARENA_OFF);
		len = 1 + rn(1 << 20);
	} else { /* nowhere: NULL, past user space, kernel addresses, wrapping lengths */
		static const uint64_t where[] = { 0, 4096, 0x800000000000ULL, 0xffff888000000000ULL,
						  0xfffffffffffff000ULL };

		addr = where[rn(ARRAY_SIZE(where))] + rn(2) * rn(4096);
		len = pct(50) ? 1 + rn(1 << 20) : ~0ULL - rn(4096);
	}
	/* Write rights only where the device's writes cannot hit anything of ours. */
	if (!in_reservation(addr, len))
		access &= ~WRITE_RIGHTS;
	iova = pct(80) ? addr : (pct(50) ? r64() : rn(1 << 20));
	note("reg_mr");
	errno = 0;
	if (pct(50) && iova == addr)
		mr = ibv_reg_mr(pds[p].pd, (void *)(uintptr_t)addr, len, (int)access);
	else
		mr = ibv_reg_mr_iova2(pds[p].pd, (void *)(uintptr_t)addr, len, iova, access);
	if (stat_ptr(v, mr))
		return;
	mrs[i].mr = mr;
	mrs[i].pd = p;
	mrs[i].addr = iova;
	mrs[i].len = len;
	mrs[i].access = access;
	hints_update();
}

static void act_dereg_mr(void)
{
	int i = PICK_LIVE(mrs, mr);
	uint32_t lkey, rkey;

	if (i < 0)
		return;
	lkey = mrs[i].mr->lkey;
	rkey = mrs[i].mr->rkey;
	note("dereg_mr");
	/* Bound MWs keep the kernel from letting it go (EBUSY). */
	if (!stat_rc(V_DEREG_MR, ibv_dereg_mr(mrs[i].mr))) {
		mrs[i].mr = NULL;
		bury_key(lkey);
		bury_key(rkey);
		hints_update();
	}
}

static void act_rereg_mr(void)
{
	int i = PICK_LIVE(mrs, mr), p = PICK_LIVE(pds, pd);
	int flags = (int)rn(8) & (IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS);
	unsigned int access = any_access();
	int rc;

	if (i < 0 || p < 0)
		return;
	/* No new translation: the range stays, and write rights stay where they may be. */
	if (!in_reservation(mrs[i].addr, mrs[i].len) || (mrs[i].access & IBV_ACCESS_ON_DEMAND && pct(50)))
		access &= ~WRITE_RIGHTS;
	access |= mrs[i].access & IBV_ACCESS_ON_DEMAND;
	if (pct(10))
		flags = (int)r32() & ~IBV_REREG_MR_CHANGE_TRANSLATION;
	note("rereg_mr");
	errno = 0;
	rc = ibv_rereg_mr(mrs[i].mr, flags, pds[p].pd, NULL, 0, (int)access);
	/* Its failures are IBV_REREG_MR_ERR_* (negative); the kernel's reason is in errno. */
	if (!stat_rc(V_REREG_MR, rc ? (errno ? errno : EINVAL) : 0)) {
		if (flags & IBV_REREG_MR_CHANGE_PD)
			mrs[i].pd = p;
		if (flags & IBV_REREG_MR_CHANGE_ACCESS)
			mrs[i].access = access;
		hints_update();
	}
}

static void act_advise_mr(void)
{
	int i = PICK_LIVE(mrs, mr);
	struct ibv_sge sge;
	uint64_t room;

	if (i < 0)
		return;
	sge.addr = any_addr(&room);
	sge.length = any_len(room);
	sge.lkey = mrs[i].mr->lkey;
	note("advise_mr");
	stat_rc(V_ADVISE_MR, ibv_advise_mr(mrs[i].mr->pd, (enum ibv_advise_mr_advice)rn(4), (uint32_t)rn(2), &sge, 1));
}

static void act_alloc_mw(void)
{
	int i = PICK_FREE(mws, mw), p = PICK_LIVE(pds, pd);
	enum ibv_mw_type t = pct(45) ? IBV_MW_TYPE_1 : pct(90) ? IBV_MW_TYPE_2 : (enum ibv_mw_type)rn(8);

	if (i < 0 || p < 0)
		return;
	note("alloc_mw");
	errno = 0;
	mws[i].mw = ibv_alloc_mw(pds[p].pd, t);
	if (!stat_ptr(V_ALLOC_MW, mws[i].mw)) {
		mws[i].pd = p;
		mws[i].rkey = mws[i].mw->rkey;
		hints_update();
	}
}

static void act_dealloc_mw(void)
{
	int i = PICK_LIVE(mws, mw);
	uint32_t rkey;

	if (i < 0)
		return;
	rkey = mws[i].mw->rkey;
	note("dealloc_mw");
	if (!stat_rc(V_DEALLOC_MW, ibv_dealloc_mw(mws[i].mw))) {
		mws[i].mw = NULL;
		bury_key(rkey);
		hints_update();
	}
}

static void fill_bind_info(struct ibv_mw_bind_info *b, int mr)
{
	b->mr = mrs[mr].mr;
	b->addr = mrs[mr].addr + (pct(70) ? rn(mrs[mr].len ? mrs[mr].len : 1) : r64());
	b->length = pct(70) ? rn(mrs[mr].len + 1) : r64();
	b->mw_access_flags = pct(60) ? (unsigned int)(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						     IBV_ACCESS_REMOTE_ATOMIC) : any_access();
}

static void act_bind_mw(void)
{
	int w = PICK_LIVE(mws, mw), q = PICK_LIVE(qps, qp), m = PICK_LIVE(mrs, mr);
	struct ibv_mw_bind bind = { 0 };

	/* The provider dereferences the MR even to unbind: always a live one. */
	if (w < 0 || q < 0 || m < 0)
		return;
	/* Mostly a bind that can work: a type 1 MW, and an MR of its PD that allows binding. */
	if (pct(80)) {
		int n = 0;

		for (int a = 0; a < MAX_MW; a++)
			for (int b = 0; b < MAX_MR; b++)
				if (mws[a].mw && mrs[b].mr && mws[a].mw->type == IBV_MW_TYPE_1 &&
				    mrs[b].mr->pd == mws[a].mw->pd && (mrs[b].access & IBV_ACCESS_MW_BIND) &&
				    rn(++n) == 0) {
					w = a;
					m = b;
				}
	}
	bind.wr_id = r64();
	bind.send_flags = (unsigned int)rn(16);
	fill_bind_info(&bind.bind_info, m);
	note("bind_mw");
	if (!stat_rc(V_BIND_MW, ibv_bind_mw(qps[q].qp, mws[w].mw, &bind))) {
		mws[w].rkey = mws[w].mw->rkey;
		hints_update();
	}
}

/*
 * A size that the device accepts, kept at most `cap`; sizes past `limit` stay as they are (they
 * are refused). At the device's limits a ring has 2^20 entries, tens to hundreds of MiB of
 * kernel memory: a few of them alive at once fill a 2 GiB guest, and the OOM killer then takes
 * the fuzzer. The limits themselves are probed by the refused sizes just past them, and the
 * sizes at them by user-sizes.
 */
static uint32_t accepted_at_most(uint32_t v, uint32_t limit, uint32_t cap)
{
	return v <= limit && v > cap ? cap : v;
}

static int cq_depth(void)
{
	uint32_t max = (uint32_t)dattr.max_cqe;

	switch (rn(10)) {
	case 0: return (int)accepted_at_most(interesting32(max), max, 65536);
	case 1: return (int)accepted_at_most(max + (uint32_t)rn(3) - 1, max, 65536);
	case 2: return 0;
	default: return 1 + (int)rn(pct(80) ? 64 : 4096);
	}
}

static void act_create_cq(void)
{
	int i = PICK_FREE(cqs, cq), gone;
	int cqe = cq_depth(), vec = pct(90) ? (int)rn((uint64_t)ctx->num_comp_vectors) : (int)r32();
	struct ibv_cq *cq;

	if (i < 0)
		return;
	note("create_cq");
	maps_snapshot();
	errno = 0;
	cq = ibv_create_cq(ctx, cqe, NULL, pct(60) ? chan : NULL, vec);
	if (stat_ptr(V_CREATE_CQ, cq))
		return;
	memset(&cqs[i], 0, sizeof(cqs[i]));
	cqs[i].cq = cq;
	if (maps_new(&cqs[i].ring, 1, &gone) == 1)
		ring_init(&cqs[i].ring, "CQ");
}

static void act_destroy_cq(void)
{
	int i = PICK_LIVE(cqs, cq);

	if (i < 0)
		return;
	note("destroy_cq");
	drain_events();
	/* QPs still attached make the kernel refuse (EBUSY). */
	if (!stat_rc(V_DESTROY_CQ, ibv_destroy_cq(cqs[i].cq)))
		cqs[i].cq = NULL;
}

static void act_resize_cq(void)
{
	int i = PICK_LIVE(cqs, cq), gone, n;
	struct ring nr;

	if (i < 0 || cqs[i].unusable)
		return;
	note("resize_cq");
	maps_snapshot();
	if (stat_rc(V_RESIZE_CQ, ibv_resize_cq(cqs[i].cq, cq_depth())))
		return;
	/* The provider unmapped the old ring and mapped the new one (maybe at the same place). */
	n = maps_new(&nr, 1, &gone);
	if (n == 1) {
		cqs[i].ring = nr;
		ring_init(&cqs[i].ring, "resized CQ");
	} else if (gone) {
		/* Its mmap of the new ring failed: the provider holds no ring any more. */
		finding("resize_cq succeeded but the provider could not map the new ring");
		cqs[i].unusable = 1;
		cqs[i].ring.addr = NULL;
	} else if (cqs[i].ring.addr) {
		ring_init(&cqs[i].ring, "resized CQ");
	}
}

static void act_poll_cq(void)
{
	int i = PICK_LIVE(cqs, cq), n;
	struct ibv_wc wc[64];

	if (i < 0 || cqs[i].unusable)
		return;
	note("poll_cq");
	n = ibv_poll_cq(cqs[i].cq, pct(90) ? 1 + (int)rn(64) : (int)rn(2), wc);
	stat_rc(V_POLL_CQ, n < 0 ? -n : 0);
	for (int k = 0; k < n && k < 64; k++)
		wc_status[(unsigned int)wc[k].status < 32 ? wc[k].status : 31]++;
}

static void act_req_notify(void)
{
	int i = PICK_LIVE(cqs, cq);

	if (i < 0)
		return;
	note("req_notify_cq");
	stat_rc(V_REQ_NOTIFY_CQ, ibv_req_notify_cq(cqs[i].cq, (int)rn(2)));
}

static uint32_t wr_count(void)
{
	/* Past the device's limit is refused; at it, for 2^20 WQEs of up to 1 KiB each, would be a
	 * gigabyte of kernel memory in a 2 GiB guest: big stays at 16 Ki, and rare (a ring that size
	 * takes the debug kernel under TCG a second or more to allocate and clear). */
	switch (rn(12)) {
	case 0: return dattr.max_qp_wr + 1 + (uint32_t)rn(2) * r32();
	case 1: return pct(10) ? (pct(30) ? 16384 : (uint32_t)rn(16385)) : (uint32_t)rn(1025);
	case 2: return 0;
	default: return 1 + (uint32_t)rn(pct(80) ? 32 : 1024);
	}
}

static uint32_t sge_count(uint32_t max)
{
	switch (rn(10)) {
	case 0: return max + (uint32_t)rn(3);
	case 1: return interesting32(max);
	case 2: return 0;
	default: return 1 + (uint32_t)rn(4);
	}
}

static void act_create_srq(void)
{
	int i = PICK_FREE(srqs, srq), p = PICK_LIVE(pds, pd), gone;
	struct ibv_srq_init_attr a = { 0 };
	struct ibv_srq *srq;

	if (i < 0 || p < 0)
		return;
	a.attr.max_wr = pct(10) ? accepted_at_most(dattr.max_srq_wr + (uint32_t)rn(3), dattr.max_srq_wr, 16384) :
				  wr_count();
	a.attr.max_sge = sge_count((uint32_t)dattr.max_srq_sge);
	a.attr.srq_limit = pct(70) ? (uint32_t)rn(a.attr.max_wr + 2) : r32();
	note("create_srq");
	maps_snapshot();
	errno = 0;
	srq = ibv_create_srq(pds[p].pd, &a);
	if (stat_ptr(V_CREATE_SRQ, srq))
		return;
	memset(&srqs[i], 0, sizeof(srqs[i]));
	srqs[i].srq = srq;
	srqs[i].pd = p;
	srqs[i].max_sge = a.attr.max_sge; /* what the kernel granted, as the provider keeps it */
	if (maps_new(&srqs[i].ring, 1, &gone) == 1)
		ring_init(&srqs[i].ring, "SRQ");
}

static void act_destroy_srq(void)
{
	int i = PICK_LIVE(srqs, srq);

	if (i < 0)
		return;
	note("destroy_srq");
	drain_events();
	if (!stat_rc(V_DESTROY_SRQ, ibv_destroy_srq(srqs[i].srq)))
		srqs[i].srq = NULL;
}

static void act_modify_srq(void)
{
	int i = PICK_LIVE(srqs, srq), mask, gone, n;
	struct ibv_srq_attr a = { 0 };
	struct ring nr;

	if (i < 0 || srqs[i].unusable)
		return;
	a.max_wr = pct(15) ? accepted_at_most(dattr.max_srq_wr + (uint32_t)rn(3), dattr.max_srq_wr, 16384) : wr_count();
	a.srq_limit = pct(70) ? (uint32_t)rn(64) : r32();
	mask = pct(90) ? 1 + (int)rn(3) : (int)r32();
	note("modify_srq");
	maps_snapshot();
	if (stat_rc(V_MODIFY_SRQ, ibv_modify_srq(srqs[i].srq, &a, mask)))
		return;
	if (!(mask & IBV_SRQ_MAX_WR))
		return;
	n = maps_new(&nr, 1, &gone);
	if (n == 1) {
		srqs[i].ring = nr;
		ring_init(&srqs[i].ring, "resized SRQ");
	} else if (gone) {
		finding("modify_srq(max_wr %u) succeeded but the provider could not map the new ring",
			a.max_wr);
		srqs[i].unusable = 1;
		srqs[i].ring.addr = NULL;
	} else if (srqs[i].ring.addr) {
		ring_init(&srqs[i].ring, "resized SRQ");
	}
}

static void act_query_srq(void)
{
	int i = PICK_LIVE(srqs, srq);
	struct ibv_srq_attr a;

	if (i < 0)
		return;
	note("query_srq");
	stat_rc(V_QUERY_SRQ, ibv_query_srq(srqs[i].srq, &a));
}

static void act_create_qp(void)
{
	int i = PICK_FREE(qps, qp), p = PICK_LIVE(pds, pd), s = PICK_LIVE(cqs, cq), r = PICK_LIVE(cqs, cq);
	int srq = pct(25) ? PICK_LIVE(srqs, srq) : -1, n, gone;
	struct ibv_qp_init_attr a = { 0 };
	static const enum ibv_qp_type odd[] = { IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV,
						IBV_QPT_DRIVER, 0, 1, 5, 7, 12 };
	struct ring rings[2];
	struct ibv_qp *qp;

	if (i < 0 || p < 0 || s < 0 || r < 0)
		return;
	switch (rn(20)) {
	case 0: a.qp_type = odd[rn(ARRAY_SIZE(odd))]; break;
	case 1: case 2: case 3: case 4: case 5: a.qp_type = IBV_QPT_UD; break;
	case 6: case 7: case 8: case 9: a.qp_type = IBV_QPT_UC; break;
	default: a.qp_type = IBV_QPT_RC; break;
	}
	a.send_cq = cqs[s].cq;
	a.recv_cq = cqs[r].cq;
	a.srq = srq >= 0 ? srqs[srq].srq : NULL;
	a.cap.max_send_wr = wr_count();
	a.cap.max_recv_wr = wr_count();
	a.cap.max_send_sge = sge_count((uint32_t)dattr.max_sge);
	a.cap.max_recv_sge = sge_count((uint32_t)dattr.max_sge);
	switch (rn(6)) {
	case 0: a.cap.max_inline_data = interesting32(512); break;
	case 1: case 2: a.cap.max_inline_data = (uint32_t)rn(600); break;
	default: a.cap.max_inline_data = 0; break;
	}
	a.sq_sig_all = (int)rn(2);
	note("create_qp");
	maps_snapshot();
	errno = 0;
	qp = ibv_create_qp(pds[p].pd, &a);
	if (stat_ptr(V_CREATE_QP, qp))
		return;
	memset(&qps[i], 0, sizeof(qps[i]));
	qps[i].qp = qp;
	qps[i].pd = p;
	qps[i].scq = s;
	qps[i].rcq = r;
	qps[i].srq = srq;
	qps[i].type = a.qp_type;
	/* ibv_create_qp wrote back what the kernel granted, which the provider checks against. */
	qps[i].max_send_sge = a.cap.max_send_sge;
	qps[i].max_recv_sge = a.cap.max_recv_sge;
	qps[i].max_inline = a.cap.max_inline_data;
	/* The SQ's slots hold the 208-byte WQE header: the ring with the larger elements. */
	n = maps_new(rings, 2, &gone);
	for (int k = 0; k < n; k++)
		ring_init(&rings[k], "QP");
	if (n == 2 && rings[0].addr && rings[1].addr) {
		int big = rings[1].log2 > rings[0].log2;

		qps[i].sq = rings[big];
		qps[i].rq = rings[!big];
	} else if (n == 1 && rings[0].addr) {
		qps[i].sq = rings[0];
	}
	hints_update();
}

static void act_destroy_qp(void)
{
	int i = PICK_LIVE(qps, qp);
	uint32_t qpn;

	if (i < 0)
		return;
	qpn = qps[i].qp->qp_num;
	note("destroy_qp");
	drain_events();
	if (!stat_rc(V_DESTROY_QP, ibv_destroy_qp(qps[i].qp))) {
		qps[i].qp = NULL;
		bury_qpn(qpn);
		hints_update();
	}
}

static void any_ah_attr(struct ibv_ah_attr *ah, int sane)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = sane || pct(90);
	ah->port_num = sane || pct(95) ? 1 : (uint8_t)rn(4) * 64;
	ah->sl = (uint8_t)rn(sane ? 8 : 256);
	ah->static_rate = sane ? 0 : (uint8_t)rn(32);
	ah->dlid = sane ? 0 : (uint16_t)r32();
	ah->src_path_bits = sane ? 0 : (uint8_t)rn(256);
	ah->grh.sgid_index = sane || pct(90) ? (uint8_t)gid_index : (uint8_t)rn(max_gid_index + 4);
	ah->grh.hop_limit = sane ? 64 : (uint8_t)rn(256);
	ah->grh.traffic_class = (uint8_t)rn(256);
	ah->grh.flow_label = sane ? 0 : r32() & 0xfffff;
	ah->grh.dgid = own_gid;
	if (!sane && pct(8)) {
		switch (rn(4)) {
		case 0: /* somewhere unreachable: address resolution has to give up */
			rfill(&R, ah->grh.dgid.raw, 16);
			break;
		case 1: /* a multicast group */
			rfill(&R, ah->grh.dgid.raw, 16);
			ah->grh.dgid.raw[0] = 0xff;
			break;
		case 2: /* the unspecified address, or loopback */
			memset(ah->grh.dgid.raw, 0, 16);
			ah->grh.dgid.raw[15] = (uint8_t)rn(2);
			break;
		default: /* a v4-mapped neighbour on our subnet */
			ah->grh.dgid.raw[15] ^= (uint8_t)(1 + rn(3));
			break;
		}
	}
}

static void act_create_ah(void)
{
	int i = PICK_FREE(ahs, ah), p = PICK_LIVE(pds, pd);
	struct ibv_ah_attr a;

	if (i < 0 || p < 0)
		return;
	any_ah_attr(&a, pct(70));
	note("create_ah");
	errno = 0;
	ahs[i].ah = ibv_create_ah(pds[p].pd, &a);
	if (!stat_ptr(V_CREATE_AH, ahs[i].ah))
		ahs[i].pd = p;
}

static void act_destroy_ah(void)
{
	int i = PICK_LIVE(ahs, ah);

	if (i < 0)
		return;
	note("destroy_ah");
	if (!stat_rc(V_DESTROY_AH, ibv_destroy_ah(ahs[i].ah)))
		ahs[i].ah = NULL;
}

/* A live QP to connect to: of the same type mostly. */
static int pick_peer(int self)
{
	for (int tries = 0; tries < 8; tries++) {
		int j = PICK_LIVE(qps, qp);

		if (j >= 0 && (qps[j].type == qps[self].type || pct(10)))
			return j;
	}
	return self;
}

static void act_modify_qp_next(void)
{
	int i = PICK_LIVE(qps, qp), mask = IBV_QP_STATE, peer;
	struct ibv_qp_attr a = { 0 }, q;
	struct ibv_qp_init_attr init;
	enum ibv_qp_type t;

	if (i < 0)
		return;
	t = qps[i].type;
	note("query_qp");
	if (stat_rc(V_QUERY_QP, ibv_query_qp(qps[i].qp, &q, IBV_QP_STATE, &init)))
		return;
	switch (q.qp_state) {
	case IBV_QPS_RESET:
		a.qp_state = IBV_QPS_INIT;
		a.port_num = 1;
		a.pkey_index = 0;
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (t == IBV_QPT_UD) {
			a.qkey = pct(80) ? 0x11111111 : r32();
			mask |= IBV_QP_QKEY;
		} else {
			a.qp_access_flags = pct(70) ? IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
							      IBV_ACCESS_REMOTE_ATOMIC : (unsigned int)rn(16);
			mask |= IBV_QP_ACCESS_FLAGS;
		}
		break;
	case IBV_QPS_INIT:
		a.qp_state = IBV_QPS_RTR;
		if (t == IBV_QPT_RC || t == IBV_QPT_UC) {
			peer = pick_peer(i);
			a.dest_qp_num = qps[peer].qp->qp_num;
			a.rq_psn = pct(70) ? (uint32_t)rn(16) : r32() & 0xffffff;
			qps[i].rq_psn = a.rq_psn;
			a.path_mtu = (enum ibv_mtu)(1 + rn(5));
			any_ah_attr(&a.ah_attr, pct(95));
			mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
			if (t == IBV_QPT_RC) {
				a.max_dest_rd_atomic = (uint8_t)rn(17);
				a.min_rnr_timer = (uint8_t)rn(32);
				mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			}
		}
		break;
	case IBV_QPS_RTR:
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = pct(70) ? (uint32_t)rn(16) : r32() & 0xffffff;
		qps[i].sq_psn = a.sq_psn;
		mask |= IBV_QP_SQ_PSN;
		if (t == IBV_QPT_RC) {
			a.timeout = (uint8_t)(pct(80) ? 8 + rn(8) : rn(32));
			a.retry_cnt = (uint8_t)rn(8);
			a.rnr_retry = (uint8_t)rn(8);
			a.max_rd_atomic = (uint8_t)rn(17);
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		break;
	case IBV_QPS_RTS:
		/* Mostly leave it working; sometimes drain it, break it or start over. */
		switch (rn(6)) {
		case 0: a.qp_state = IBV_QPS_SQD; break;
		case 1: a.qp_state = IBV_QPS_ERR; break;
		case 2: a.qp_state = IBV_QPS_RESET; break;
		default: return;
		}
		break;
	case IBV_QPS_SQD:
		a.qp_state = pct(70) ? IBV_QPS_RTS : IBV_QPS_ERR;
		break;
	default: /* SQE, ERR */
		a.qp_state = pct(70) ? IBV_QPS_RESET : IBV_QPS_RTS;
		break;
	}
	note("modify_qp");
	stat_rc(V_MODIFY_QP_CONNECT, ibv_modify_qp(qps[i].qp, &a, mask));
	hints_update();
}

static void act_modify_qp_random(void)
{
	int i = PICK_LIVE(qps, qp), mask;
	struct ibv_qp_attr a;

	if (i < 0)
		return;
	memset(&a, 0, sizeof(a));
	if (pct(30)) {
		rfill(&R, &a, sizeof(a));
	} else {
		a.qp_state = (enum ibv_qp_state)rn(pct(90) ? 7 : 256);
		a.cur_qp_state = (enum ibv_qp_state)rn(8);
		a.path_mtu = (enum ibv_mtu)rn(8);
		a.path_mig_state = (enum ibv_mig_state)rn(4);
		a.qkey = pct(50) ? 0x11111111 : r32();
		a.rq_psn = r32();
		a.sq_psn = r32();
		a.dest_qp_num = any_qpn();
		a.qp_access_flags = any_access();
		a.cap.max_send_wr = wr_count();
		a.cap.max_recv_wr = wr_count();
		a.cap.max_send_sge = sge_count((uint32_t)dattr.max_sge);
		a.cap.max_recv_sge = sge_count((uint32_t)dattr.max_sge);
		a.cap.max_inline_data = interesting32(512);
		any_ah_attr(&a.ah_attr, pct(50));
		any_ah_attr(&a.alt_ah_attr, pct(50));
		a.pkey_index = (uint16_t)(pct(80) ? 0 : r32());
		a.alt_pkey_index = (uint16_t)rn(4);
		a.en_sqd_async_notify = (uint8_t)rn(2);
		a.max_rd_atomic = (uint8_t)interesting32((uint32_t)dattr.max_qp_rd_atom);
		a.max_dest_rd_atomic = (uint8_t)interesting32((uint32_t)dattr.max_qp_init_rd_atom);
		a.min_rnr_timer = (uint8_t)rn(40);
		a.port_num = (uint8_t)(pct(80) ? 1 : rn(256));
		a.timeout = (uint8_t)rn(40);
		a.retry_cnt = (uint8_t)rn(10);
		a.rnr_retry = (uint8_t)rn(10);
		a.alt_port_num = (uint8_t)rn(3);
		a.alt_timeout = (uint8_t)rn(32);
		a.rate_limit = pct(90) ? 0 : r32();
	}
	switch (rn(4)) {
	case 0: mask = (int)(r32() & ((1u << 21) - 1)); break;
	case 1: mask = (int)r32(); break;
	default: mask = (int)(r32() & r32() & ((1u << 21) - 1)) | IBV_QP_STATE; break;
	}
	note("modify_qp(random)");
	if (!stat_rc(V_MODIFY_QP, ibv_modify_qp(qps[i].qp, &a, mask))) {
		if (mask & IBV_QP_SQ_PSN)
			qps[i].sq_psn = a.sq_psn & 0xffffff;
		if (mask & IBV_QP_RQ_PSN)
			qps[i].rq_psn = a.rq_psn & 0xffffff;
		hints_update();
	}
}

static void act_query_qp(void)
{
	int i = PICK_LIVE(qps, qp);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;

	if (i < 0)
		return;
	note("query_qp");
	stat_rc(V_QUERY_QP, ibv_query_qp(qps[i].qp, &a, pct(80) ? (int)(r32() & ((1u << 21) - 1)) : (int)r32(), &init));
}

/* ---- work requests --------------------------------------------------------------------------- */

#define MAX_WR_CHAIN 8
#define MAX_SGE_ARR 64

static void fill_sges(struct ibv_sge *sg, int n, int inl)
{
	for (int k = 0; k < n; k++) {
		uint64_t room;

		if (inl) {
			/* The provider copies inline data from these addresses itself: ours, in
			 * bounds, small enough that the lengths cannot wrap their 32-bit sum. */
			uint32_t off = (uint32_t)rn(sizeof(scratch));

			sg[k].addr = (uintptr_t)scratch + off;
			sg[k].length = (uint32_t)rn((pct(80) ? 128 : sizeof(scratch) - off) + 1);
			if (sg[k].length > sizeof(scratch) - off)
				sg[k].length = (uint32_t)(sizeof(scratch) - off);
			sg[k].lkey = any_lkey();
			continue;
		}
		sg[k].addr = any_addr(&room);
		sg[k].length = any_len(room);
		sg[k].lkey = any_lkey();
	}
}

static const enum ibv_wr_opcode send_ops[] = {
	IBV_WR_SEND, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE,
	IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
	IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_LOCAL_INV, IBV_WR_BIND_MW, IBV_WR_SEND_WITH_INV,
	IBV_WR_FLUSH, IBV_WR_ATOMIC_WRITE, IBV_WR_TSO, IBV_WR_DRIVER1,
};

static void act_post_send(void)
{
	int i = PICK_LIVE(qps, qp), nwr = 1 + (int)rn(pct(80) ? 2 : MAX_WR_CHAIN);
	struct ibv_send_wr wr[MAX_WR_CHAIN], *bad;
	struct ibv_sge sg[MAX_WR_CHAIN][MAX_SGE_ARR];
	int ah = -1;

	/* Mostly on a QP that can send (as far as libibverbs knows its state). */
	for (int tries = 0; i >= 0 && tries < 6 && qps[i].qp->state != IBV_QPS_RTS && pct(80); tries++)
		i = PICK_LIVE(qps, qp);
	if (i < 0)
		return;
	if (qps[i].type == IBV_QPT_UD) {
		/* The provider reads the AH of every WR on a UD QP: only live ones. */
		ah = PICK_LIVE(ahs, ah);
		if (ah < 0)
			return;
	}
	memset(wr, 0, sizeof(wr));
	for (int k = 0; k < nwr; k++) {
		struct ibv_send_wr *w = &wr[k];
		uint32_t maxs = qps[i].max_send_sge;
		uint64_t room;
		int inl;

		w->wr_id = r64();
		w->next = k + 1 < nwr ? &wr[k + 1] : NULL;
		w->opcode = pct(95) ? send_ops[rn(ARRAY_SIZE(send_ops))] : (enum ibv_wr_opcode)rn(256);
		w->send_flags = (unsigned int)(pct(60) ? IBV_SEND_SIGNALED : 0) | (unsigned int)(pct(10) ? IBV_SEND_SOLICITED : 0) |
				(unsigned int)(pct(10) ? IBV_SEND_FENCE : 0) | (unsigned int)(pct(3) ? IBV_SEND_IP_CSUM : 0);
		inl = qps[i].max_inline && pct(20);
		if (inl)
			w->send_flags |= IBV_SEND_INLINE;
		w->num_sge = (int)(pct(90) ? rn((maxs < 4 ? maxs : 4) + 1) : rn(maxs + 2));
		if (w->num_sge > MAX_SGE_ARR)
			w->num_sge = MAX_SGE_ARR;
		fill_sges(sg[k], w->num_sge, inl);
		w->sg_list = sg[k];
		if (w->opcode == IBV_WR_SEND_WITH_INV || w->opcode == IBV_WR_LOCAL_INV)
			w->invalidate_rkey = any_rkey();
		else
			w->imm_data = htonl(r32());
		if (ah >= 0) {
			w->wr.ud.ah = ahs[ah].ah;
			w->wr.ud.remote_qpn = any_qpn();
			w->wr.ud.remote_qkey = pct(70) ? 0x11111111 : r32();
		} else if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w->wr.atomic.remote_addr = any_addr(&room) & (pct(90) ? ~7ULL : ~0ULL);
			w->wr.atomic.compare_add = r64();
			w->wr.atomic.swap = r64();
			w->wr.atomic.rkey = any_rkey();
		} else {
			w->wr.rdma.remote_addr = any_addr(&room);
			w->wr.rdma.rkey = any_rkey();
		}
		if (w->opcode == IBV_WR_BIND_MW) {
			/* The provider dereferences both the MW and the MR: live ones, or no bind. */
			int mw = PICK_LIVE(mws, mw), mr = PICK_LIVE(mrs, mr);

			if (mw < 0 || mr < 0) {
				w->opcode = IBV_WR_SEND;
			} else {
				w->num_sge = 0;
				w->imm_data = 0;
				w->bind_mw.mw = mws[mw].mw;
				w->bind_mw.rkey = pct(85) ? ibv_inc_rkey(mws[mw].rkey) : r32();
				fill_bind_info(&w->bind_mw.bind_info, mr);
				mws[mw].rkey = w->bind_mw.rkey;
			}
		}
	}
	note("post_send");
	stat_rc(V_POST_SEND, ibv_post_send(qps[i].qp, wr, &bad));
	hints_update();
}

static void fill_recv(struct ibv_recv_wr *wr, struct ibv_sge (*sg)[MAX_SGE_ARR], int nwr, uint32_t maxs)
{
	for (int k = 0; k < nwr; k++) {
		wr[k].wr_id = r64();
		wr[k].next = k + 1 < nwr ? &wr[k + 1] : NULL;
		wr[k].num_sge = (int)(pct(90) ? rn((maxs < 4 ? maxs : 4) + 1) : rn(maxs + 2));
		if (wr[k].num_sge > MAX_SGE_ARR)
			wr[k].num_sge = MAX_SGE_ARR;
		fill_sges(sg[k], wr[k].num_sge, 0);
		wr[k].sg_list = sg[k];
	}
}

static void act_post_recv(void)
{
	int i = PICK_LIVE(qps, qp), nwr = 1 + (int)rn(pct(70) ? 4 : MAX_WR_CHAIN);
	struct ibv_recv_wr wr[MAX_WR_CHAIN], *bad;
	struct ibv_sge sg[MAX_WR_CHAIN][MAX_SGE_ARR];

	if (i < 0)
		return;
	fill_recv(wr, sg, nwr, qps[i].max_recv_sge);
	note("post_recv");
	stat_rc(V_POST_RECV, ibv_post_recv(qps[i].qp, wr, &bad));
}

static void act_post_srq_recv(void)
{
	int i = PICK_LIVE(srqs, srq), nwr = 1 + (int)rn(pct(70) ? 4 : MAX_WR_CHAIN);
	struct ibv_recv_wr wr[MAX_WR_CHAIN], *bad;
	struct ibv_sge sg[MAX_WR_CHAIN][MAX_SGE_ARR];

	if (i < 0 || srqs[i].unusable)
		return;
	fill_recv(wr, sg, nwr, srqs[i].max_sge);
	note("post_srq_recv");
	stat_rc(V_POST_SRQ_RECV, ibv_post_srq_recv(srqs[i].srq, wr, &bad));
}

/* ---- ring corruption ---------------------------------------------------------------------- */

/* Rings the SQ doorbell without adding a WQE: an atomic WR shorter than 8 bytes fails the
 * provider's own check before it touches the ring, and the provider still makes the empty
 * post_send system call that wakes the kernel. */
static void doorbell(struct ibv_qp *qp)
{
	struct ibv_send_wr wr = { 0 }, *bad;

	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.num_sge = 0;
	ibv_post_send(qp, &wr, &bad);
}

/* Puts back what the provider computes addresses from: the element size, the index mask and
 * the index it owns (the producer of a work queue, the consumer of a CQ), folded into the ring. */
static void ring_sanitize(struct ring *r, enum ring_kind kind)
{
	struct rxe_queue_buf *q = (struct rxe_queue_buf *)r->addr;

	q->log2_elem_size = r->log2;
	q->index_mask = r->mask;
	if (kind == RING_CQ)
		q->consumer_index &= r->mask;
	else
		q->producer_index &= r->mask;
}

static void garbage_send_wqe(uint8_t *slot, size_t elem)
{
	struct rxe_send_wqe *w = (struct rxe_send_wqe *)slot;
	size_t nsge = elem > sizeof(*w) ? (elem - sizeof(*w)) / sizeof(struct rxe_sge) : 0;
	uint64_t room;

	if (elem < sizeof(*w))
		return;
	memset(w, 0, elem);
	w->wr.wr_id = r64();
	w->wr.opcode = pct(80) ? send_ops[rn(ARRAY_SIZE(send_ops))] : r32();
	w->wr.send_flags = pct(80) ? (uint32_t)rn(16) : r32();
	w->wr.ex.invalidate_rkey = any_rkey();
	w->wr.wr.rdma.remote_addr = any_addr(&room);
	w->wr.wr.rdma.rkey = any_rkey();
	if (pct(30)) {
		w->wr.wr.ud.remote_qpn = any_qpn();
		w->wr.wr.ud.remote_qkey = pct(50) ? 0x11111111 : r32();
		w->wr.wr.ud.ah_num = (uint32_t)rn(64);
	}
	if (pct(15))
		rfill(&R, &w->wr.wr, sizeof(w->wr.wr));
	w->iova = w->wr.wr.rdma.remote_addr;
	w->dma.num_sge = pct(70) ? (uint32_t)rn(nsge + 1) : interesting32((uint32_t)nsge);
	for (size_t k = 0; k < nsge && k < w->dma.num_sge; k++) {
		w->dma.sge[k].addr = any_addr(&room);
		w->dma.sge[k].length = any_len(room);
		w->dma.sge[k].lkey = any_lkey();
		w->dma.length += w->dma.sge[k].length;
	}
	if (pct(20))
		w->dma.length = interesting32((uint32_t)(elem - sizeof(*w)));
	w->dma.resid = pct(80) ? w->dma.length : r32();
	if (pct(10)) {
		w->dma.cur_sge = r32();
		w->dma.sge_offset = r32();
	}
	if (pct(10)) {
		w->state = r32();
		w->status = r32();
		w->mask = r32();
		w->first_psn = r32();
		w->last_psn = r32();
		w->ssn = r32();
	}
}

static void garbage_recv_wqe(uint8_t *slot, size_t elem)
{
	struct rxe_recv_wqe *w = (struct rxe_recv_wqe *)slot;
	size_t nsge = elem > sizeof(*w) ? (elem - sizeof(*w)) / sizeof(struct rxe_sge) : 0;
	uint64_t room;

	if (elem < sizeof(*w))
		return;
	memset(w, 0, elem);
	w->wr_id = r64();
	w->dma.num_sge = pct(70) ? (uint32_t)rn(nsge + 1) : interesting32((uint32_t)nsge);
	for (size_t k = 0; k < nsge && k < w->dma.num_sge; k++) {
		w->dma.sge[k].addr = any_addr(&room);
		w->dma.sge[k].length = any_len(room);
		w->dma.sge[k].lkey = any_lkey();
		w->dma.length += w->dma.sge[k].length;
	}
	if (pct(20))
		w->dma.length = r32();
	w->dma.resid = pct(80) ? w->dma.length : r32();
	if (pct(10)) {
		w->dma.cur_sge = r32();
		w->dma.sge_offset = r32();
	}
}

static void ring_chaos_one(struct ring *r, enum ring_kind kind)
{
	struct rxe_queue_buf *q = (struct rxe_queue_buf *)r->addr;
	size_t elem = (size_t)1 << r->log2, slots = (size_t)r->mask + 1;
	uint8_t *data = r->addr + sizeof(*q);
	uint32_t p, c;

	switch (rn(9)) {
	case 0:
		q->producer_index = pct(50) ? interesting32(r->mask) : r32();
		break;
	case 1:
		q->consumer_index = pct(50) ? interesting32(r->mask) : r32();
		break;
	case 2:
		q->producer_index = r32();
		q->consumer_index = r32();
		break;
	case 3: /* random bytes over some slots */
		for (int k = 1 + (int)rn(4); k > 0; k--) {
			size_t s = rn(slots), off = rn(elem), n = 1 + rn(elem - off);

			rfill(&R, data + s * elem + off, n);
		}
		break;
	case 4: case 5: { /* well-formed-looking garbage WQEs (or CQEs), published */
		int n = 1 + (int)rn(pct(80) ? 2 : slots);

		p = q->producer_index & r->mask;
		c = q->consumer_index & r->mask;
		for (int k = 0; k < n; k++) {
			uint8_t *slot = data + (size_t)((p + (uint32_t)k) & r->mask) * elem;

			if (kind == RING_SQ)
				garbage_send_wqe(slot, elem);
			else if (kind == RING_CQ)
				rfill(&R, slot, elem);
			else
				garbage_recv_wqe(slot, elem);
		}
		if (kind == RING_CQ)
			q->producer_index = (c + (uint32_t)n) & r->mask;
		else
			q->producer_index = (p + (uint32_t)n) & (pct(90) ? r->mask : 0xffffffff);
		break;
	}
	case 6: /* the whole mapping, header included */
		rfill(&R, r->addr, r->size);
		break;
	case 7: /* the header's element size and mask */
		q->log2_elem_size = pct(50) ? r32() : (uint32_t)rn(32);
		q->index_mask = pct(50) ? r32() : interesting32(r->mask);
		break;
	default: /* every slot one byte, the ring made to look full */
		memset(data, pct(50) ? 0xff : 0, slots * elem);
		q->producer_index = (q->consumer_index + r->mask) & (pct(80) ? r->mask : 0xffffffff);
		break;
	}
}

static void act_ring_chaos(void)
{
	int kind = (int)rn(4), i;

	switch (kind) {
	case RING_SQ:
		i = PICK_LIVE(qps, qp);
		if (i < 0 || !qps[i].sq.addr)
			return;
		note("ring:sq");
		ring_chaos_one(&qps[i].sq, RING_SQ);
		doorbell(qps[i].qp);
		ring_sanitize(&qps[i].sq, RING_SQ);
		stat_rc(V_RING_SQ, 0);
		break;
	case RING_RQ:
		i = PICK_LIVE(qps, qp);
		if (i < 0 || !qps[i].rq.addr)
			return;
		note("ring:rq");
		ring_chaos_one(&qps[i].rq, RING_RQ);
		/* No receive doorbell: the next packet for this QP reads it. Its peer's traffic
		 * comes from the post_send actions. */
		ring_sanitize(&qps[i].rq, RING_RQ);
		stat_rc(V_RING_RQ, 0);
		break;
	case RING_SRQ:
		i = PICK_LIVE(srqs, srq);
		if (i < 0 || !srqs[i].ring.addr)
			return;
		note("ring:srq");
		ring_chaos_one(&srqs[i].ring, RING_SRQ);
		ring_sanitize(&srqs[i].ring, RING_SRQ);
		stat_rc(V_RING_SRQ, 0);
		break;
	default:
		i = PICK_LIVE(cqs, cq);
		if (i < 0 || !cqs[i].ring.addr)
			return;
		note("ring:cq");
		ring_chaos_one(&cqs[i].ring, RING_CQ);
		/* Its doorbell is a completion: ring some QP that uses it. */
		for (int k = 0; k < MAX_QP; k++)
			if (qps[k].qp && qps[k].scq == i) {
				doorbell(qps[k].qp);
				break;
			}
		ring_sanitize(&cqs[i].ring, RING_CQ);
		stat_rc(V_RING_CQ, 0);
		break;
	}
}

/* ---- memory under MRs ------------------------------------------------------------------------ */

static void act_mem(void)
{
	int odp = pct(40), n = odp ? (int)NODP : (int)NARENA, c = (int)rn((uint64_t)n);
	size_t chunk = odp ? ODP_CHUNK : ARENA_CHUNK;
	uint8_t *a = res + (odp ? ODP_OFF : ARENA_OFF) + (size_t)c * chunk;
	int *prot = odp ? &odp_prot[c] : &arena_prot[c];
	static const int prots[] = { PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE, PROT_READ | PROT_WRITE };
	int np;

	switch (rn(4)) {
	case 0: /* fresh pages at the same address: pinned MRs keep the old ones */
		note("mem:remap");
		stat_rc(V_MEM_REMAP, mmap(a, chunk, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED ? errno : 0);
		*prot = PROT_READ | PROT_WRITE;
		break;
	case 1:
		np = prots[rn(ARRAY_SIZE(prots))];
		note("mem:mprotect");
		if (!stat_rc(V_MEM_PROTECT, mprotect(a, chunk, np) ? errno : 0))
			*prot = np;
		break;
	case 2:
		note("mem:dontneed");
		stat_rc(V_MEM_DONTNEED, madvise(a + (rn(chunk / 2) & ~4095ULL), rn(chunk / 2), MADV_DONTNEED) ? errno : 0);
		break;
	default:
		if (*prot != (PROT_READ | PROT_WRITE))
			return;
		note("mem:scribble");
		rfill(&R, a + rn(chunk - 65536), rn(65536));
		stat_rc(V_MEM_SCRIBBLE, 0);
		break;
	}
}

/* ---- queries ---------------------------------------------------------------------------------- */

static void act_query(void)
{
	union ibv_gid g;
	uint16_t pkey;

	switch (rn(4)) {
	case 0: {
		struct ibv_device_attr_ex ax;

		note("query_device");
		stat_rc(V_QUERY_DEVICE, ibv_query_device_ex(ctx, NULL, &ax));
		break;
	}
	case 1: {
		struct ibv_port_attr pa;

		note("query_port");
		stat_rc(V_QUERY_PORT, ibv_query_port(ctx, (uint8_t)(pct(90) ? 1 : rn(256)), &pa));
		break;
	}
	case 2:
		note("query_gid");
		stat_rc(V_QUERY_GID, ibv_query_gid(ctx, (uint8_t)(pct(90) ? 1 : rn(4)),
						   pct(90) ? (int)rn(max_gid_index + 2) : (int)r32(), &g));
		break;
	default:
		note("query_pkey");
		stat_rc(V_QUERY_PKEY, ibv_query_pkey(ctx, (uint8_t)(pct(90) ? 1 : rn(4)),
						     pct(90) ? (int)rn(4) : (int)r32(), &pkey));
		break;
	}
}

/* ---- the packet child ----------------------------------------------------------------------- */

static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32_le(uint32_t crc, const uint8_t *p, size_t n)
{
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/*
 * The RoCEv2 ICRC exactly as drivers/infiniband/sw/roxe/proto/icrc.rs checks it: CRC-32
 * (reflected 0xedb88320) from the register eight 0xff bytes leave (0xdebb20e3), over the IPv4
 * header with TOS, TTL and checksum set to ones, the UDP header with its checksum set to ones,
 * the BTH with its fifth byte set to ones, then everything after the BTH up to the ICRC;
 * inverted, and sent least significant byte first.
 */
static uint32_t icrc_v4(const uint8_t *ip, size_t iplen, const uint8_t *udp, const uint8_t *t, size_t tlen)
{
	uint8_t h[60], u[8], b[12];
	uint32_t r = 0xdebb20e3u;

	memcpy(h, ip, iplen);
	h[1] = 0xff;
	h[8] = 0xff;
	h[10] = h[11] = 0xff;
	r = crc32_le(r, h, iplen);
	memcpy(u, udp, 8);
	u[6] = u[7] = 0xff;
	r = crc32_le(r, u, 8);
	memcpy(b, t, 12);
	b[4] = 0xff;
	r = crc32_le(r, b, 12);
	r = crc32_le(r, t + 12, tlen - 12);
	return ~r;
}

static int hexbytes(const char *s, uint8_t *out)
{
	int n = 0;

	while (*s) {
		unsigned int v;

		if (*s == ' ') {
			s++;
			continue;
		}
		if (sscanf(s, "%2x", &v) != 1)
			break;
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

/* The known answers of icrc.rs's tests: a ConnectX-4 Lx CNP and scapy's UC SEND. */
static int icrc_selftest(void)
{
	static const char *const cnp_ip = "45c2003c718c4000401191610a0011010a001201";
	static const char *const uc_ip = "45010040047840004011b4d5c0a80007c0a80007";
	uint8_t ip[20], udp[8], t[64];
	uint32_t v;
	int ok = 1;

	crc_init();
	hexbytes(cnp_ip, ip);
	hexbytes("000012b700280000", udp);
	memset(t, 0, sizeof(t));
	hexbytes("8100ffff4000011800000000", t); /* BTH; 16 reserved zero bytes follow */
	v = icrc_v4(ip, 20, udp, t, 28);
	printf("icrc selftest: CNP %#010x (expected 0x2a00fd82)\n", v);
	ok &= v == 0x2a00fd82u;
	hexbytes(uc_ip, ip);
	hexbytes("c00012b7002caca2", udp);
	hexbytes("2460ffff000000d300cf1710", t);
	memcpy(t + 12, "F0\x81\x8b\xe2\x89" "5\xd9\x0e\x9a\x95PT\x01\xbe\x88^P\x00\x00", 20);
	v = icrc_v4(ip, 20, udp, t, 32);
	printf("icrc selftest: UC SEND %02x %02x %02x %02x (expected 78 f3 53 f3)\n", v & 0xff,
	       (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24);
	ok &= v == 0xf353f378u;
	return ok ? 0 : 1;
}

/* Extension headers of each opcode's low five bits (RC, UC; UD adds a DETH). */
enum { H_RETH = 1, H_AETH = 2, H_ATOMIC = 4, H_IMM = 8, H_IETH = 16, H_ATOMICACK = 32, H_FETH = 64, H_DETH = 128,
       H_PAYLOAD = 256, H_AW = 512 };

static unsigned int op_headers(uint8_t op)
{
	unsigned int tr = op & 0xe0, low = op & 0x1f;
	static const unsigned int rc[32] = {
		[0x00] = H_PAYLOAD, [0x01] = H_PAYLOAD, [0x02] = H_PAYLOAD, [0x03] = H_PAYLOAD | H_IMM,
		[0x04] = H_PAYLOAD, [0x05] = H_PAYLOAD | H_IMM, [0x06] = H_PAYLOAD | H_RETH,
		[0x07] = H_PAYLOAD, [0x08] = H_PAYLOAD, [0x09] = H_PAYLOAD | H_IMM,
		[0x0a] = H_PAYLOAD | H_RETH, [0x0b] = H_PAYLOAD | H_RETH | H_IMM, [0x0c] = H_RETH,
		[0x0d] = H_PAYLOAD | H_AETH, [0x0e] = H_PAYLOAD, [0x0f] = H_PAYLOAD | H_AETH,
		[0x10] = H_PAYLOAD | H_AETH, [0x11] = H_AETH, [0x12] = H_AETH | H_ATOMICACK,
		[0x13] = H_ATOMIC, [0x14] = H_ATOMIC, [0x16] = H_PAYLOAD | H_IETH,
		[0x17] = H_PAYLOAD | H_IETH, [0x1c] = H_FETH | H_RETH, [0x1d] = H_RETH | H_AW,
	};

	if (tr == 0x60)
		return low == 0x04 ? (H_DETH | H_PAYLOAD) : low == 0x05 ? (H_DETH | H_PAYLOAD | H_IMM) : H_PAYLOAD;
	if (tr == 0x00 || tr == 0x20)
		return rc[low] ? rc[low] : H_PAYLOAD;
	return H_PAYLOAD;
}

static const uint8_t rc_ops[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
				  0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x16,
				  0x17, 0x1c, 0x1d };
static const uint8_t uc_ops[] = { 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b };

struct pktctx {
	struct rng r;
	struct hints h; /* a snapshot of the parent's */
	uint8_t dst_mac[6], src_mac[6];
	uint32_t dst_ip, src_ip; /* network order */
	int fd, ifindex, raw_ip;
};

static uint64_t pr(struct pktctx *c, uint64_t n) { return n ? rng_next(&c->r) % n : 0; }

static void put_be(uint8_t *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static uint16_t ip_csum(const uint8_t *h, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* Builds one RoCEv2 transport part (BTH to payload and pad, no ICRC) into t; returns its length. */
static size_t build_transport(struct pktctx *c, uint8_t *t, size_t max)
{
	struct hints *h = &c->h;
	int live = h->nqp && pr(c, 100) < 70, k = 0;
	uint32_t qpn, psn, type = 0;
	uint8_t op;
	unsigned int hdr;
	size_t n = 12, pay;

	if (live) {
		k = (int)pr(c, h->nqp);
		qpn = h->qp[k].qpn;
		type = h->qp[k].type;
	} else {
		switch (pr(c, 4)) {
		case 0: qpn = 1; break; /* the GSI QP: MADs */
		case 1: qpn = 0xffffff; break; /* multicast */
		case 2: qpn = (uint32_t)rng_next(&c->r) & 0xffffff; break;
		default: qpn = (uint32_t)pr(c, 64); break;
		}
	}
	if (type == IBV_QPT_UD || qpn == 1 || (!live && pr(c, 4) == 0))
		op = pr(c, 4) ? 0x64 : 0x65;
	else if (type == IBV_QPT_UC)
		op = uc_ops[pr(c, ARRAY_SIZE(uc_ops))];
	else
		op = rc_ops[pr(c, ARRAY_SIZE(rc_ops))];
	if (pr(c, 100) < 6)
		op = (uint8_t)rng_next(&c->r);
	hdr = op_headers(op);
	if (live && pr(c, 100) < 75) {
		/* near where the QP's responder or requester started */
		uint32_t base = (op & 0x1f) >= 0x0d && (op & 0x1f) <= 0x12 ? h->qp[k].sq_psn : h->qp[k].rq_psn;

		psn = (base + (uint32_t)pr(c, 64) - 8) & 0xffffff;
	} else {
		psn = (uint32_t)rng_next(&c->r) & 0xffffff;
	}
	memset(t, 0, 12);
	t[0] = op;
	t[2] = 0xff;
	t[3] = 0xff;
	if (pr(c, 100) < 5)
		put_be(t + 2, rng_next(&c->r), 2);
	if (pr(c, 100) < 3)
		t[1] = (uint8_t)(pr(c, 16)); /* header version */
	t[1] |= (uint8_t)(pr(c, 2) << 7); /* solicited event */
	t[4] = pr(c, 100) < 5 ? (uint8_t)rng_next(&c->r) : 0;
	put_be(t + 5, qpn, 3);
	t[8] = (uint8_t)(pr(c, 2) << 7) | (pr(c, 100) < 3 ? (uint8_t)pr(c, 128) : 0);
	put_be(t + 9, psn, 3);
	if (hdr & H_DETH) {
		put_be(t + n, pr(c, 100) < 70 ? 0x11111111 : rng_next(&c->r), 4);
		put_be(t + n + 5, pr(c, 2) ? (uint32_t)pr(c, 64) : rng_next(&c->r), 3);
		n += 8;
	}
	if (hdr & H_FETH) {
		put_be(t + n, rng_next(&c->r), 4);
		n += 4;
	}
	if (hdr & (H_RETH | H_ATOMIC)) {
		uint64_t va = rng_next(&c->r), len = rng_next(&c->r);
		uint32_t rkey = (uint32_t)rng_next(&c->r);

		if (h->nkey && pr(c, 100) < 80) {
			int m = (int)pr(c, h->nkey);
			uint64_t mlen = h->key[m].len;

			rkey = h->key[m].rkey;
			va = h->key[m].addr + (mlen && mlen < (1ULL << 40) ? pr(c, mlen + 64) : pr(c, 1 << 20));
			len = pr(c, 3) ? pr(c, 4097) : pr(c, 2) ? mlen : (uint32_t)rng_next(&c->r);
		}
		if (hdr & H_ATOMIC)
			va &= pr(c, 10) ? ~7ULL : ~0ULL;
		put_be(t + n, va, 8);
		put_be(t + n + 8, rkey, 4);
		if (hdr & H_ATOMIC) {
			put_be(t + n + 12, rng_next(&c->r), 8);
			put_be(t + n + 20, rng_next(&c->r), 8);
			n += 28;
		} else {
			put_be(t + n + 12, len, 4);
			n += 16;
		}
	}
	if (hdr & H_AETH) {
		static const uint8_t syn[] = { 0x00, 0x1f, 0x20, 0x3f, 0x60, 0x61, 0x62, 0x63, 0x64, 0x9f, 0xff };

		t[n] = pr(c, 100) < 80 ? syn[pr(c, ARRAY_SIZE(syn))] : (uint8_t)rng_next(&c->r);
		put_be(t + n + 1, pr(c, 2) ? pr(c, 64) : rng_next(&c->r), 3);
		n += 4;
	}
	if (hdr & H_ATOMICACK) {
		put_be(t + n, rng_next(&c->r), 8);
		n += 8;
	}
	if (hdr & (H_IMM | H_IETH)) {
		uint32_t v = (uint32_t)rng_next(&c->r);

		if ((hdr & H_IETH) && h->nkey && pr(c, 2))
			v = h->key[pr(c, h->nkey)].rkey;
		put_be(t + n, v, 4);
		n += 4;
	}
	pay = 0;
	if (hdr & H_AW)
		pay = 8;
	else if (hdr & H_PAYLOAD)
		pay = pr(c, 100) < 60 ? pr(c, 257) : pr(c, max - n + 1);
	if (n + pay + 3 > max)
		pay = max > n + 3 ? max - n - 3 : 0;
	rfill(&c->r, t + n, pay);
	n += pay;
	/* the pad count that makes it whole, mostly */
	{
		unsigned int padc = (unsigned int)((4 - pay % 4) % 4);

		if (pr(c, 100) < 5)
			padc = (unsigned int)pr(c, 4);
		t[1] = (uint8_t)((t[1] & ~0x30) | padc << 4);
		memset(t + n, 0, padc);
		n += padc;
	}
	return n;
}

/* One frame: Ethernet (AF_PACKET mode), IPv4, UDP to 4791, a RoCEv2 transport part, mutated
 * or not, with a valid ICRC or not. Returns the frame length and sets *valid. */
static size_t build_frame(struct pktctx *c, uint8_t *f, int *valid)
{
	uint8_t *ip = f + 14, *udp, *t;
	size_t iplen = 20, tlen, extra = 0, max;
	uint32_t icrc;
	int mutate = pr(c, 100) < 35, junk = pr(c, 100) < 4;

	memcpy(f, c->dst_mac, 6);
	memcpy(f + 6, c->src_mac, 6);
	f[12] = 0x08;
	f[13] = 0x00;
	if (pr(c, 100) < 3)
		iplen = 24 + 4 * pr(c, 10); /* IP options: NOPs and an end */
	udp = ip + iplen;
	t = udp + 8;
	max = 1500 - iplen - 8 - 4;
	if (junk) {
		tlen = 12 + pr(c, max - 12);
		rfill(&c->r, t, tlen);
	} else {
		tlen = build_transport(c, t, max);
	}
	if (mutate) {
		for (int k = 1 + (int)pr(c, 4); k > 0; k--) {
			switch (pr(c, 6)) {
			case 0: t[pr(c, tlen)] ^= (uint8_t)(1u << pr(c, 8)); break;
			case 1: t[pr(c, tlen)] = (uint8_t)rng_next(&c->r); break;
			case 2: t[pr(c, tlen < 40 ? tlen : 40)] = (uint8_t)rng_next(&c->r); break; /* headers */
			case 3: tlen = pr(c, tlen + 1); break; /* cut short, even below a BTH */
			case 4: { size_t add = pr(c, 64); if (tlen + add <= max) { rfill(&c->r, t + tlen, add); tlen += add; } break; }
			default: t[0] = (uint8_t)rng_next(&c->r); break;
			}
		}
	}
	/* IPv4 */
	memset(ip, 0, iplen);
	ip[0] = (uint8_t)(0x40 | iplen / 4);
	ip[1] = (uint8_t)pr(c, 256);
	put_be(ip + 4, 1 + pr(c, 0xfffe), 2); /* nonzero: a raw socket keeps it */
	ip[6] = 0x40; /* DF */
	ip[8] = 64;
	ip[9] = 17;
	memcpy(ip + 12, &c->src_ip, 4);
	memcpy(ip + 16, &c->dst_ip, 4);
	for (size_t o = 20; o < iplen; o++)
		ip[o] = o + 1 < iplen ? 1 : 0;
	/* UDP */
	put_be(udp, 49152 + pr(c, 16384), 2);
	put_be(udp + 2, 4791, 2);
	put_be(udp + 4, 8 + tlen + 4, 2);
	/* No UDP checksum, as RoCEv2 senders do (a random one, now and then, fails the UDP layer). */
	put_be(udp + 6, pr(c, 100) < 1 ? rng_next(&c->r) : 0, 2);
	if (pr(c, 100) < 3) { /* bytes past the UDP datagram: the IP layer trims them */
		extra = pr(c, 32);
		if (iplen + 8 + tlen + 4 + extra > 1500)
			extra = 0;
		rfill(&c->r, t + tlen + 4, extra);
	}
	/* The ICRC covers the IP total length and the UDP length: both final before it. */
	put_be(ip + 2, iplen + 8 + tlen + 4 + extra, 2);
	*valid = 0;
	if (tlen >= 12 && pr(c, 100) < 80) {
		icrc = icrc_v4(ip, iplen, udp, t, tlen);
		*valid = 1;
		if (pr(c, 100) < 5) {
			icrc ^= 1u << pr(c, 32);
			*valid = 0;
		}
	} else {
		icrc = pr(c, 2) ? 0 : (uint32_t)rng_next(&c->r);
	}
	t[tlen] = (uint8_t)icrc;
	t[tlen + 1] = (uint8_t)(icrc >> 8);
	t[tlen + 2] = (uint8_t)(icrc >> 16);
	t[tlen + 3] = (uint8_t)(icrc >> 24);
	tlen += 4;
	if (pr(c, 100) < 2) { /* a UDP length that disagrees */
		put_be(udp + 4, pr(c, 65536), 2);
		*valid = 0;
	}
	put_be(ip + 10, ip_csum(ip, iplen), 2);
	return 14 + iplen + 8 + tlen + extra;
}

static int read_mac(const char *ifname, uint8_t *mac)
{
	char path[256];
	unsigned int m[6];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/sys/class/net/%s/address", ifname);
	f = fopen(path, "r");
	if (!f)
		return -1;
	ok = fscanf(f, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6;
	fclose(f);
	for (int i = 0; i < 6 && ok; i++)
		mac[i] = (uint8_t)m[i];
	return ok ? 0 : -1;
}

/* Sends frames until the parent says stop or for `limit` seconds. */
static void packet_child(struct pktctx *c, double limit, unsigned int pps)
{
	uint8_t frame[1600];
	struct timespec t0, now;
	uint64_t n = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		double el;
		size_t len;
		int valid;
		ssize_t rc;

		if (hints->stop)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (el > limit)
			break;
		if (n > el * pps) {
			struct timespec ts = { 0, 2000000 };

			nanosleep(&ts, NULL);
			continue;
		}
		if ((n & 63) == 0)
			memcpy(&c->h, hints, sizeof(c->h)); /* racy, and only hints */
		if (c->h.nqp > MAX_QP)
			c->h.nqp = 0;
		if (c->h.nkey > MAX_MR + MAX_MW)
			c->h.nkey = 0;
		len = build_frame(c, frame, &valid);
		if (c->raw_ip) {
			struct sockaddr_in sin = { .sin_family = AF_INET };

			sin.sin_addr.s_addr = c->dst_ip;
			rc = sendto(c->fd, frame + 14, len - 14, 0, (struct sockaddr *)&sin, sizeof(sin));
		} else {
			struct sockaddr_ll sll = { .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP),
						   .sll_ifindex = c->ifindex, .sll_halen = 6 };

			memcpy(sll.sll_addr, c->dst_mac, 6);
			rc = sendto(c->fd, frame, len, 0, (struct sockaddr *)&sll, sizeof(sll));
		}
		n++;
		if (rc < 0) {
			hints->send_errors++;
		} else {
			hints->sent++;
			hints->sent_icrc_ok += (uint64_t)valid;
		}
	}
}

/* Opens the socket the frames go out by: AF_PACKET on inject_if toward the MAC of netdev ndev,
 * or (no inject_if) a raw IP socket. */
static int open_injector(struct pktctx *pc, const char *ndev, const char *inject_if, unsigned int pps)
{
	char a[INET_ADDRSTRLEN], b[INET_ADDRSTRLEN];

	if (inject_if) {
		struct sockaddr_ll sll = { .sll_family = AF_PACKET };

		pc->fd = socket(AF_PACKET, SOCK_RAW, 0); /* protocol 0: receives nothing */
		pc->ifindex = (int)if_nametoindex(inject_if);
		if (pc->fd < 0 || !pc->ifindex || read_mac(ndev, pc->dst_mac) || read_mac(inject_if, pc->src_mac)) {
			fprintf(stderr, "verbs_fuzz: cannot inject on %s toward %s: %s\n", inject_if, ndev,
				strerror(errno));
			return -1;
		}
		sll.sll_ifindex = pc->ifindex;
		if (bind(pc->fd, (struct sockaddr *)&sll, sizeof(sll))) {
			perror("bind AF_PACKET");
			return -1;
		}
	} else {
		pc->raw_ip = 1;
		pc->fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
		if (pc->fd < 0) {
			perror("raw socket");
			return -1;
		}
	}
	inet_ntop(AF_INET, &pc->src_ip, a, sizeof(a));
	inet_ntop(AF_INET, &pc->dst_ip, b, sizeof(b));
	printf("packets: %s -> %s:4791 (netdev %s) %s%s, up to %u/s\n", a, b, ndev,
	       inject_if ? "as frames on " : "through a raw IP socket", inject_if ? inject_if : "", pps);
	return 0;
}

/* --packets-to IP@NETDEV: only the packet generator, no device (for testing it: frames toward
 * NETDEV's MAC, sent on --inject-if). */
static int packets_only(const char *to, const char *inject_if, const char *pkt_src, double seconds,
			unsigned int pps, uint64_t seed)
{
	static struct pktctx pc;
	char ip[64], *at;

	snprintf(ip, sizeof(ip), "%s", to);
	at = strchr(ip, '@');
	if (!at)
		usage();
	*at = 0;
	memset(&pc, 0, sizeof(pc));
	rng_seed(&pc.r, seed ^ 0x5eed5eed5eed5eedULL);
	crc_init();
	if (inet_pton(AF_INET, ip, &pc.dst_ip) != 1)
		usage();
	pc.src_ip = pc.dst_ip ^ htonl(3);
	if (pkt_src && inet_pton(AF_INET, pkt_src, &pc.src_ip) != 1)
		usage();
	hints = mmap(NULL, sizeof(*hints), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (hints == MAP_FAILED)
		return 2;
	memset(hints, 0, sizeof(*hints));
	if (open_injector(&pc, at + 1, inject_if, pps))
		return 2;
	packet_child(&pc, seconds, pps);
	printf("packets: %" PRIu64 " sent (%" PRIu64 " with a valid ICRC), %" PRIu64 " send errors\n",
	       hints->sent, hints->sent_icrc_ok, hints->send_errors);
	return 0;
}

/* ---- main ---------------------------------------------------------------------------------- */

static double seconds_arg = 60;
static volatile sig_atomic_t stopping;

static void dump_trace(int sig)
{
	char buf[128];
	int n;

	n = snprintf(buf, sizeof(buf), "verbs_fuzz: signal %d; the last actions, oldest first:\n", sig);
	if (write(2, buf, (size_t)n) < 0)
		_exit(4);
	for (unsigned int i = 0; i < ARRAY_SIZE(trace); i++) {
		const char *s = trace[(trace_pos + i) % ARRAY_SIZE(trace)];

		if (!s)
			continue;
		if (write(2, "  ", 2) < 0 || write(2, s, strlen(s)) < 0 || write(2, "\n", 1) < 0)
			_exit(4);
	}
	if (hints)
		hints->stop = 1;
	_exit(sig == SIGALRM ? 3 : 128 + sig);
}

struct action {
	void (*fn)(void);
	unsigned int weight;
	const char *name;
};

static double action_secs[64];
static uint64_t action_runs[64];

static const struct action actions[] = {
	{ act_alloc_pd, 2, "alloc_pd" }, { act_dealloc_pd, 1, "dealloc_pd" },
	{ act_reg_mr, 7, "reg_mr" }, { act_dereg_mr, 4, "dereg_mr" },
	{ act_rereg_mr, 1, "rereg_mr" }, { act_advise_mr, 1, "advise_mr" },
	{ act_alloc_mw, 3, "alloc_mw" }, { act_dealloc_mw, 2, "dealloc_mw" },
	{ act_bind_mw, 3, "bind_mw" }, { act_create_cq, 4, "create_cq" },
	{ act_destroy_cq, 2, "destroy_cq" }, { act_resize_cq, 2, "resize_cq" },
	{ act_poll_cq, 14, "poll_cq" }, { act_req_notify, 3, "req_notify" },
	{ drain_events, 3, "drain_events" }, { act_create_qp, 6, "create_qp" },
	{ act_destroy_qp, 3, "destroy_qp" }, { act_modify_qp_next, 16, "modify_qp_next" },
	{ act_modify_qp_random, 5, "modify_qp_random" }, { act_query_qp, 2, "query_qp" },
	{ act_create_srq, 2, "create_srq" }, { act_destroy_srq, 1, "destroy_srq" },
	{ act_modify_srq, 2, "modify_srq" }, { act_query_srq, 1, "query_srq" },
	{ act_create_ah, 3, "create_ah" }, { act_destroy_ah, 2, "destroy_ah" },
	{ act_post_send, 20, "post_send" }, { act_post_recv, 10, "post_recv" },
	{ act_post_srq_recv, 4, "post_srq_recv" }, { act_ring_chaos, 6, "ring_chaos" },
	{ act_mem, 2, "mem" }, { act_query, 2, "query" },
};

static void usage(void)
{
	fprintf(stderr, "usage: verbs_fuzz -d DEV -g GIDIDX -t SECONDS [-s SEED] [--packets [--inject-if IF] "
			"[--pkt-src A.B.C.D] [--pps N]] [--user UID]\n"
			"       verbs_fuzz --packets-to A.B.C.D@NETDEV --inject-if IF -t SECONDS [-s SEED] [--pps N]\n"
			"       verbs_fuzz --selftest\n");
	exit(2);
}

/* Tears everything down in dependency order; returns how many objects would not go. */
static int teardown(void)
{
	int left = 0;

	drain_events();
	for (int i = 0; i < MAX_QP; i++)
		if (qps[i].qp && !stat_rc(V_DESTROY_QP, ibv_destroy_qp(qps[i].qp)))
			qps[i].qp = NULL;
	for (int i = 0; i < MAX_MW; i++)
		if (mws[i].mw && !stat_rc(V_DEALLOC_MW, ibv_dealloc_mw(mws[i].mw)))
			mws[i].mw = NULL;
	for (int i = 0; i < MAX_AH; i++)
		if (ahs[i].ah && !stat_rc(V_DESTROY_AH, ibv_destroy_ah(ahs[i].ah)))
			ahs[i].ah = NULL;
	drain_events();
	for (int i = 0; i < MAX_SRQ; i++)
		if (srqs[i].srq && !stat_rc(V_DESTROY_SRQ, ibv_destroy_srq(srqs[i].srq)))
			srqs[i].srq = NULL;
	for (int i = 0; i < MAX_MR; i++)
		if (mrs[i].mr && !stat_rc(V_DEREG_MR, ibv_dereg_mr(mrs[i].mr)))
			mrs[i].mr = NULL;
	drain_events();
	for (int i = 0; i < MAX_CQ; i++)
		if (cqs[i].cq && !stat_rc(V_DESTROY_CQ, ibv_destroy_cq(cqs[i].cq)))
			cqs[i].cq = NULL;
	for (int i = 0; i < MAX_PD; i++)
		if (pds[i].pd && !stat_rc(V_DEALLOC_PD, ibv_dealloc_pd(pds[i].pd)))
			pds[i].pd = NULL;
	left = COUNT_LIVE(qps, qp) + COUNT_LIVE(mws, mw) + COUNT_LIVE(ahs, ah) + COUNT_LIVE(srqs, srq) +
	       COUNT_LIVE(mrs, mr) + COUNT_LIVE(cqs, cq) + COUNT_LIVE(pds, pd);
	return left;
}

static void print_stats(void)
{
	static const char *const wcs[] = { "SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR",
					   "LOC_PROT_ERR", "WR_FLUSH_ERR", "MW_BIND_ERR", "BAD_RESP_ERR",
					   "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
					   "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",
					   "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR", "INV_EECN_ERR",
					   "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR",
					   "TM_ERR", "TM_RNDV_INCOMPLETE" };

	printf("%-24s %10s %10s  %s\n", "verb", "calls", "errors", "errnos (count)");
	for (int v = 0; v < NVERB; v++) {
		printf("%-24s %10" PRIu64 " %10" PRIu64 " ", verb_name[v], calls[v], fails[v]);
		for (int e = 0; e < NERRNO; e++)
			if (errs[v][e])
				printf(" %s(%u)", e ? strerrorname_np(e) ? strerrorname_np(e) : "?" : "other", errs[v][e]);
		printf("\n");
	}
	printf("completions:");
	for (unsigned int s = 0; s < 32; s++)
		if (wc_status[s])
			printf(" %s %" PRIu64, s < ARRAY_SIZE(wcs) ? wcs[s] : "other", wc_status[s]);
	printf("\nasync events:");
	for (unsigned int s = 0; s < 32; s++)
		if (async_type[s])
			printf(" %s %" PRIu64, ibv_event_type_str((enum ibv_event_type)s), async_type[s]);
	printf("\n");
}

/*
 * Becomes user `uid` (its group too, no supplementary groups) once the packet child, which
 * keeps root to write raw frames, has forked: the fuzzing runs with an ordinary user's limits
 * (RLIMIT_MEMLOCK, no CAP_IPC_LOCK). The device is opened again afterwards: uverbs refuses
 * write() commands on a file opened with other credentials.
 */
static int drop_to_user(const char *dev, uid_t uid)
{
	struct ibv_device **list;

	if (ibv_close_device(ctx)) {
		fprintf(stderr, "verbs_fuzz: cannot close %s\n", dev);
		return 1;
	}
	ctx = NULL;
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) || setresuid(uid, uid, uid)) {
		perror("verbs_fuzz: becoming the user");
		return 1;
	}
	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "verbs_fuzz: cannot open %s as uid %u\n", dev, (unsigned int)uid);
		return 1;
	}
	printf("verbs_fuzz: running as uid %u\n", (unsigned int)getuid());
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "packets", no_argument, NULL, 'P' }, { "inject-if", required_argument, NULL, 'I' },
		{ "pkt-src", required_argument, NULL, 'S' }, { "pps", required_argument, NULL, 'R' },
		{ "selftest", no_argument, NULL, 'T' }, { "packets-to", required_argument, NULL, 'D' },
		{ "user", required_argument, NULL, 'U' }, { NULL, 0, NULL, 0 },
	};
	const char *dev = NULL, *inject_if = NULL, *pkt_src = NULL, *packets_to = NULL;
	int packets = 0, opt, left, status;
	long user = -1;
	unsigned int pps = 1500;
	uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	struct ibv_device **list;
	struct timespec t0, now, t1;
	pid_t child = -1;
	double el, next_report = 10;
	uint32_t wsum = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((opt = getopt_long(argc, argv, "d:g:t:s:", lo, NULL)) != -1) {
		switch (opt) {
		case 'd': dev = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 't': seconds_arg = atof(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'P': packets = 1; break;
		case 'I': inject_if = optarg; break;
		case 'S': pkt_src = optarg; break;
		case 'R': pps = (unsigned int)atoi(optarg); break;
		case 'T': return icrc_selftest();
		case 'D': packets_to = optarg; packets = 1; break;
		case 'U': user = strtol(optarg, NULL, 0); break;
		default: usage();
		}
	}
	if (!dev && !packets_to)
		usage();
	if (!dev)
		return packets_only(packets_to, inject_if, pkt_src, seconds_arg, pps, seed);
	printf("verbs_fuzz: device %s, GID index %d, %.0f s, seed %" PRIu64 "%s\n", dev, gid_index,
	       seconds_arg, seed, packets ? ", with packets" : "");
	rng_seed(&R, seed);
	crc_init();
	signal(SIGPIPE, SIG_IGN);

	/* The reservation, before anything else maps near it. */
	res = mmap(NULL, RES_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED) {
		perror("mmap reservation");
		return 1;
	}
	if (mmap(res + ARENA_OFF, ARENA_SIZE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED ||
	    mmap(res + ODP_OFF, ODP_SIZE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
		perror("mmap arena");
		return 1;
	}
	for (unsigned int i = 0; i < NARENA; i++)
		arena_prot[i] = PROT_READ | PROT_WRITE;
	for (unsigned int i = 0; i < NODP; i++)
		odp_prot[i] = PROT_READ | PROT_WRITE;
	rfill(&R, scratch, sizeof(scratch));
	wide = mmap(NULL, WIDE_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (wide == MAP_FAILED)
		wide = NULL; /* then the ODP registrations stay inside the reservation */

	hints = mmap(NULL, sizeof(*hints), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (hints == MAP_FAILED) {
		perror("mmap hints");
		return 1;
	}
	memset(hints, 0, sizeof(*hints));

	list = ibv_get_device_list(NULL);
	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), dev))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "verbs_fuzz: cannot open %s\n", dev);
		return 2;
	}
	ibv_free_device_list(list);
	if (ibv_query_device(ctx, &dattr) || ibv_query_port(ctx, 1, &pattr) ||
	    ibv_query_gid(ctx, 1, gid_index, &own_gid)) {
		fprintf(stderr, "verbs_fuzz: cannot query %s\n", dev);
		return 2;
	}
	max_gid_index = pattr.gid_tbl_len ? (uint32_t)pattr.gid_tbl_len : 16;
	printf("device: max_qp_wr %d max_sge %d max_cqe %d max_srq_wr %d max_srq_sge %d max_mr_size %#" PRIx64
	       " max_qp_rd_atom %d, port gid_tbl_len %d active_mtu %d\n",
	       dattr.max_qp_wr, dattr.max_sge, dattr.max_cqe, dattr.max_srq_wr, dattr.max_srq_sge,
	       (uint64_t)dattr.max_mr_size, dattr.max_qp_rd_atom, pattr.gid_tbl_len, pattr.active_mtu);

	if (packets) {
		static struct pktctx pc;
		const uint8_t *g = own_gid.raw;
		char ndev[64] = "";
		char path[256];
		FILE *f;

		memset(&pc, 0, sizeof(pc));
		rng_seed(&pc.r, seed ^ 0x5eed5eed5eed5eedULL);
		if (!(g[10] == 0xff && g[11] == 0xff && !g[0] && !g[9])) {
			fprintf(stderr, "verbs_fuzz: GID %d is not an IPv4 one: no packets\n", gid_index);
			packets = 0;
		} else {
			memcpy(&pc.dst_ip, g + 12, 4);
			pc.src_ip = pc.dst_ip ^ htonl(3);
			if (pkt_src && inet_pton(AF_INET, pkt_src, &pc.src_ip) != 1)
				usage();
			snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d", dev,
				 gid_index);
			f = fopen(path, "r");
			if (f) {
				if (!fgets(ndev, sizeof(ndev), f))
					ndev[0] = 0;
				ndev[strcspn(ndev, "\n")] = 0;
				fclose(f);
			}
			if (open_injector(&pc, ndev, inject_if, pps))
				return 2;
			child = fork();
			if (child == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL);
				packet_child(&pc, seconds_arg + 30, pps);
				_exit(0);
			}
			if (child < 0) {
				perror("fork");
				return 2;
			}
			close(pc.fd);
		}
	}

	if (user >= 0 && drop_to_user(dev, (uid_t)user))
		return 2;

	/* Nonblocking event queues: never wait for an event. */
	chan = ibv_create_comp_channel(ctx);
	if (!chan) {
		perror("ibv_create_comp_channel");
		return 2;
	}
	fcntl(chan->fd, F_SETFL, fcntl(chan->fd, F_GETFL) | O_NONBLOCK);
	fcntl(ctx->async_fd, F_SETFL, fcntl(ctx->async_fd, F_GETFL) | O_NONBLOCK);

	/* Stopped from outside, or stuck in a verb past the deadline: say where. */
	signal(SIGTERM, dump_trace);
	signal(SIGINT, dump_trace);
	signal(SIGALRM, dump_trace);
	alarm((unsigned int)seconds_arg + 45);

	for (unsigned int i = 0; i < ARRAY_SIZE(actions); i++)
		wsum += actions[i].weight;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		uint32_t w;
		unsigned int a;

		clock_gettime(CLOCK_MONOTONIC, &now);
		el = (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (el >= seconds_arg || stopping)
			break;
		if (el >= next_report) {
			printf("[%4.0f s] %" PRIu64 " actions; live: pd %d mr %d mw %d cq %d qp %d srq %d ah %d; "
			       "packets %" PRIu64 "\n", el, total_actions, COUNT_LIVE(pds, pd), COUNT_LIVE(mrs, mr),
			       COUNT_LIVE(mws, mw), COUNT_LIVE(cqs, cq), COUNT_LIVE(qps, qp), COUNT_LIVE(srqs, srq),
			       COUNT_LIVE(ahs, ah), hints->sent);
			next_report += 10;
		}
		w = (uint32_t)rn(wsum);
		for (a = 0; a < ARRAY_SIZE(actions) - 1 && w >= actions[a].weight; a++)
			w -= actions[a].weight;
		actions[a].fn();
		total_actions++;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		action_runs[a]++;
		action_secs[a] += (double)(t1.tv_sec - now.tv_sec) + (double)(t1.tv_nsec - now.tv_nsec) / 1e9;
	}

	hints->stop = 1;
	printf("verbs_fuzz: %" PRIu64 " actions in %.1f s; tearing down\n", total_actions, el);
	note("teardown");
	left = teardown();
	if (left) {
		/* Once nothing uses them every object must go; ask once more after events. */
		struct timespec ts = { 0, 200000000 };

		nanosleep(&ts, NULL);
		left = teardown();
		if (left)
			finding("%d objects could not be destroyed at the end", left);
	}
	if (ibv_destroy_comp_channel(chan))
		finding("the completion channel could not be destroyed");
	if (ibv_close_device(ctx))
		finding("the device could not be closed");
	alarm(0);
	if (child > 0) {
		if (waitpid(child, &status, 0) == child && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
			finding("the packet child ended with status %#x", status);
		printf("packets: %" PRIu64 " sent (%" PRIu64 " with a valid ICRC), %" PRIu64 " send errors\n",
		       hints->sent, hints->sent_icrc_ok, hints->send_errors);
	}
	print_stats();
	printf("time per action (runs, seconds):");
	for (unsigned int k = 0; k < ARRAY_SIZE(actions); k++)
		if (action_runs[k])
			printf(" %s %" PRIu64 "/%.1f", actions[k].name, action_runs[k], action_secs[k]);
	printf("\n");
	printf("verbs_fuzz: seed %" PRIu64 ", %" PRIu64 " actions, %d findings\n", seed, total_actions, findings);
	return findings ? 1 : 0;
}
