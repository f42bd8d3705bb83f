// SPDX-License-Identifier: GPL-2.0
/*
 * The copy ceiling `make bench` compares bulk transfers with: memcpy bandwidth between two
 * buffers of SIZE bytes (cache-warm when small), over about SECONDS of wall time, in MiB/s.
 * Built and run in the bench guest (tools/bench.sh; the guest image has gcc).
 *   memcpy-bench SIZE [SECONDS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	size_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 65536;
	double secs = argc > 2 ? atof(argv[2]) : 2.0;
	char *a = malloc(size), *b = malloc(size);
	unsigned long n = 0, batch = (256UL << 20) / size + 1;
	double t0, t;

	if (!a || !b || !size)
		return 1;
	memset(a, 1, size);
	memset(b, 2, size);
	t0 = now();
	do {
		for (unsigned long i = 0; i < batch; i++) {
			memcpy(i & 1 ? a : b, i & 1 ? b : a, size);
			/* Keeps the compiler from dropping the copies. */
			__asm__ volatile("" : : "r"(a), "r"(b) : "memory");
		}
		n += batch;
		t = now() - t0;
	} while (t < secs);
	printf("%.1f\n", (double)n * size / t / (1 << 20));
	return 0;
}
