// SPDX-License-Identifier: GPL-2.0
/*
 * A QEMU TCG plugin that counts, per translation block, how often kernel code ran: for each
 * translation whose start address is a kernel address (>= 0xffff800000000000) it writes
 * "vaddr instructions executions entered" at exit to out=PATH, after a first line "user N" (the
 * instructions user space ran). "entered" counts the executions that came from another guest
 * page (or from user space): TCG chains a jump straight to the next block only within a page,
 * so these are (with every return and indirect jump) the ones that cost a lookup. tools/tbcount/attr.py attributes the blocks to functions.
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
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t, void (*)(qemu_plugin_id_t, void *), void *);

struct rec { uint64_t vaddr; uint64_t insns; uint64_t execs; uint64_t entered; struct rec *next; };
static struct rec *head;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static const char *out = "/tmp/tbcount.txt";
static uint64_t user_insns;
/* The guest page of the block each vCPU ran last (1: a user-space block). */
#define MAX_VCPUS 64
static uint64_t last_page[MAX_VCPUS];

static void exec_cb(unsigned int vcpu, void *ud)
{
	struct rec *r = ud;
	uint64_t page = r->vaddr >> 12;
	__atomic_fetch_add(&r->execs, 1, __ATOMIC_RELAXED);
	if (vcpu < MAX_VCPUS) {
		if (last_page[vcpu] != page)
			__atomic_fetch_add(&r->entered, 1, __ATOMIC_RELAXED);
		last_page[vcpu] = page;
	}
}

static void user_cb(unsigned int vcpu, void *ud)
{
	if (vcpu < MAX_VCPUS)
		last_page[vcpu] = 1;
	__atomic_fetch_add(&user_insns, (uint64_t)(uintptr_t)ud, __ATOMIC_RELAXED);
}

static void trans_cb(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t va = qemu_plugin_tb_vaddr(tb);
	size_t n = qemu_plugin_tb_n_insns(tb);
	(void)id;
	if (va < 0xffff800000000000ull) {
		qemu_plugin_register_vcpu_tb_exec_cb(tb, user_cb, 0, (void *)(uintptr_t)n);
		return;
	}
	struct rec *r = calloc(1, sizeof(*r));
	r->vaddr = va;
	r->insns = n;
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
	fprintf(f, "user %llu\n", (unsigned long long)user_insns);
	for (struct rec *r = head; r; r = r->next)
		if (r->execs)
			fprintf(f, "%llx %llu %llu %llu\n", (unsigned long long)r->vaddr,
				(unsigned long long)r->insns, (unsigned long long)r->execs,
				(unsigned long long)r->entered);
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
