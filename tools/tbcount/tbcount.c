// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin that counts, per translation block, how often kernel code ran: for each
 * translation whose start address is a kernel address (>= 0xffff800000000000) it writes
 * "vaddr instructions executions entered atomics jc_misses" at exit to out=PATH, after a first
 * line "user N M" (the instructions user space ran, and its jump-cache misses). "entered"
 * counts the executions that came from another guest page (or from user space): TCG chains a jump straight to the next block only within a page,
 * so these are (with every return and indirect jump) the ones that cost a lookup. "atomics" is
 * the block's atomic instructions (a lock prefix, or xchg with memory), which TCG runs through
 * helper calls. "jc_misses" is how often the block missed a model of QEMU's per-vCPU jump cache
 * (below), each a lookup in QEMU's global hash table. tools/tbcount/attr.py attributes the
 * blocks to functions.
 * Counts are exact per build and boot, unlike times under TCG: compare builds by what they run.
 * It declares the few plugin API entry points it uses (as QEMU 10.0 has them); build:
 *   gcc -O2 -shared -fPIC -fvisibility=hidden -o tbcount.so tools/tbcount/tbcount.c -lpthread
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <stdbool.h>
#include <pthread.h>
typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
#define EXPORT __attribute__((visibility("default")))
EXPORT int qemu_plugin_version = 2;
void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, struct qemu_plugin_tb *));
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *, void (*)(unsigned int, void *), int, void *);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *);
struct qemu_plugin_insn;
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *, size_t);
size_t qemu_plugin_insn_data(const struct qemu_plugin_insn *, void *, size_t);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, void *), void *);

struct rec { uint64_t vaddr; uint64_t insns; uint64_t execs; uint64_t entered; uint64_t atomics;
	     uint64_t jc_misses; bool ends_indirect; struct rec *next; };
static struct rec *head;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const char *out = "/tmp/tbcount.txt";
static uint64_t user_insns, user_jc_misses;
/* The guest page of the block each vCPU ran last (1: a user-space block). */
#define MAX_VCPUS 64
static uint64_t last_page[MAX_VCPUS];
/* Whether the block each vCPU ran last ended in a return or an indirect jump or call. */
static bool last_indirect[MAX_VCPUS];
/*
 * A model of each vCPU's TB jump cache (QEMU's tb_jmp_cache: 4096 entries, hashed by guest pc
 * as tb_jmp_cache_hash_func does), consulted for every transition that is not a chained jump.
 * A miss costs QEMU a lookup in its global hash table.
 */
#define JC_BITS 12
#define JC_PAGE_BITS (JC_BITS / 2)
static uint64_t jcache[MAX_VCPUS][1 << JC_BITS];

static unsigned int jc_hash(uint64_t pc)
{
	uint64_t tmp = pc ^ (pc >> (12 - JC_PAGE_BITS));
	return ((tmp >> (12 - JC_PAGE_BITS)) & (((1u << JC_BITS) - 1) & ~((1u << JC_PAGE_BITS) - 1))) |
	       (tmp & ((1u << JC_PAGE_BITS) - 1));
}

/* Records that `vcpu` ran the block at `pc` (of page `page`); true if it missed the jump cache. */
static bool jc_visit(unsigned int vcpu, uint64_t pc, uint64_t page, bool indirect)
{
	bool miss = false;
	if (vcpu >= MAX_VCPUS)
		return false;
	if (last_page[vcpu] != page || last_indirect[vcpu]) {
		unsigned int h = jc_hash(pc);
		miss = jcache[vcpu][h] != pc;
		jcache[vcpu][h] = pc;
	}
	last_page[vcpu] = page;
	last_indirect[vcpu] = indirect;
	return miss;
}

static void exec_cb(unsigned int vcpu, void *ud)
{
	struct rec *r = ud;
	uint64_t page = r->vaddr >> 12;
	__atomic_fetch_add(&r->execs, 1, __ATOMIC_RELAXED);
	if (vcpu < MAX_VCPUS && last_page[vcpu] != page)
		__atomic_fetch_add(&r->entered, 1, __ATOMIC_RELAXED);
	if (jc_visit(vcpu, r->vaddr, page, r->ends_indirect))
		__atomic_fetch_add(&r->jc_misses, 1, __ATOMIC_RELAXED);
}

static void user_cb(unsigned int vcpu, void *ud)
{
	struct rec *r = ud;
	if (jc_visit(vcpu, r->vaddr, 1, r->ends_indirect))
		__atomic_fetch_add(&user_jc_misses, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&user_insns, r->insns, __ATOMIC_RELAXED);
}

/*
 * Whether an x86 instruction is atomic: a lock prefix, or an xchg with memory (implicitly
 * locked). TCG runs each through a helper call, so they cost far more than their count says.
 */
static bool is_atomic(const uint8_t *b, size_t n)
{
	size_t i = 0;
	for (; i < n; i++) {
		if (b[i] == 0xf0)
			return true;
		if (b[i] == 0x66 || b[i] == 0x67 || b[i] == 0xf2 || b[i] == 0xf3 || b[i] == 0x2e ||
		    b[i] == 0x3e || b[i] == 0x26 || b[i] == 0x36 || b[i] == 0x64 || b[i] == 0x65 ||
		    (b[i] & 0xf0) == 0x40)
			continue;
		break;
	}
	return i + 1 < n && (b[i] == 0x86 || b[i] == 0x87) && (b[i + 1] >> 6) != 3;
}

/* Whether an x86 instruction is a return or an indirect jump or call. */
static bool is_indirect(const uint8_t *b, size_t n)
{
	size_t i = 0;
	while (i < n && (b[i] == 0xf3 || b[i] == 0xf2 || b[i] == 0x66 || b[i] == 0x2e ||
			 b[i] == 0x3e || (b[i] & 0xf0) == 0x40))
		i++;
	if (i >= n)
		return false;
	if (b[i] == 0xc3 || b[i] == 0xc2 || b[i] == 0xcf)
		return true;
	return b[i] == 0xff && i + 1 < n && (((b[i + 1] >> 3) & 7) == 2 || ((b[i + 1] >> 3) & 7) == 4);
}

static void trans_cb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	struct rec *r = calloc(1, sizeof(*r));
	(void)id;
	r->vaddr = va;
	r->insns = n;
	for (size_t i = 0; i < n; i++) {
		uint8_t b[16];
		size_t len = qemu_plugin_insn_data(qemu_plugin_tb_get_insn(tb, i), b, sizeof(b));
		r->atomics += is_atomic(b, len);
		if (i == n - 1)
			r->ends_indirect = is_indirect(b, len);
	}
	if (va < 0xffff800000000000ull) {
		/* User space: counted in total, never listed. */
		qemu_plugin_register_vcpu_tb_exec_cb(tb, user_cb, 0, r);
		return;
	}
	pthread_mutex_lock(&mu);
	r->next = head;
	head = r;
	pthread_mutex_unlock(&mu);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, exec_cb, 0, r);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
	(void)id; (void)p;
	FILE *f = fopen(out, "w");
	if (!f)
		return;
	fprintf(f, "user %llu %llu\n", (unsigned long long)user_insns,
		(unsigned long long)user_jc_misses);
	for (struct rec *r = head; r; r = r->next)
		if (r->execs)
			fprintf(f, "%llx %llu %llu %llu %llu %llu\n", (unsigned long long)r->vaddr,
				(unsigned long long)r->insns, (unsigned long long)r->execs,
				(unsigned long long)r->entered, (unsigned long long)r->atomics,
				(unsigned long long)r->jc_misses);
	fclose(f);
}

EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const void *info, int argc, char **argv)
{
	(void)info;
	for (int i = 0; i < argc; i++)
		if (!strncmp(argv[i], "out=", 4))
			out = argv[i] + 4;
	qemu_plugin_register_vcpu_tb_trans_cb(id, trans_cb);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
