// SPDX-License-Identifier: GPL-2.0
/*
 * Data integrity through MPI (qemu/tests/mpi.sh): a ping-pong of every power-of-two size from
 * 1 B to 1 MiB, each message filled with a pattern of its size and round, checked by the peer
 * and sent back changed, checked again; then an allreduce of 65536 integers and a broadcast of
 * 256 KiB, checked on every rank. Each rank names its host ("mpi-check rank R on HOST"); rank 0
 * then prints "mpi-check ok" and the job exits 0, or the first mismatch is named and the job
 * aborted.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MSG (1 << 20)
#define ROUNDS 4
#define NINTS 65536
#define BCAST_LEN (256 << 10)

static unsigned char pattern(size_t i, int size, int round)
{
	return (unsigned char)(i * 131 + size * 7 + round * 29 + (i >> 8));
}

static void fail(const char *what, int size, size_t at)
{
	fprintf(stderr, "mpi-check: %s mismatch, size %d, byte %zu\n", what, size, at);
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void pingpong(int rank, unsigned char *buf)
{
	for (int size = 1; size <= MAX_MSG; size *= 2) {
		for (int round = 0; round < ROUNDS; round++) {
			if (rank == 0) {
				for (int i = 0; i < size; i++)
					buf[i] = pattern(i, size, round);
				MPI_Send(buf, size, MPI_BYTE, 1, round, MPI_COMM_WORLD);
				MPI_Recv(buf, size, MPI_BYTE, 1, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (int i = 0; i < size; i++)
					if (buf[i] != (unsigned char)(pattern(i, size, round) ^ 0x5a))
						fail("echo", size, i);
			} else if (rank == 1) {
				MPI_Recv(buf, size, MPI_BYTE, 0, round, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				for (int i = 0; i < size; i++) {
					if (buf[i] != pattern(i, size, round))
						fail("message", size, i);
					buf[i] ^= 0x5a;
				}
				MPI_Send(buf, size, MPI_BYTE, 0, round, MPI_COMM_WORLD);
			}
		}
	}
}

static void collectives(int rank, int nranks, unsigned char *buf)
{
	static int in[NINTS], out[NINTS];

	for (int i = 0; i < NINTS; i++)
		in[i] = rank * 1000 + i;
	MPI_Allreduce(in, out, NINTS, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < NINTS; i++)
		if (out[i] != 1000 * nranks * (nranks - 1) / 2 + nranks * i)
			fail("allreduce", NINTS, i);
	if (rank == 0)
		for (int i = 0; i < BCAST_LEN; i++)
			buf[i] = pattern(i, BCAST_LEN, 9);
	else
		memset(buf, 0, BCAST_LEN);
	MPI_Bcast(buf, BCAST_LEN, MPI_BYTE, 0, MPI_COMM_WORLD);
	for (int i = 0; i < BCAST_LEN; i++)
		if (buf[i] != pattern(i, BCAST_LEN, 9))
			fail("broadcast", BCAST_LEN, i);
}

int main(int argc, char **argv)
{
	int rank, nranks, len;
	char host[MPI_MAX_PROCESSOR_NAME];
	unsigned char *buf = malloc(MAX_MSG);

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	MPI_Get_processor_name(host, &len);
	printf("mpi-check rank %d on %s\n", rank, host);
	fflush(stdout);
	if (!buf || nranks < 2) {
		fprintf(stderr, "mpi-check: needs two ranks and 1 MiB\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	pingpong(rank, buf);
	collectives(rank, nranks, buf);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi-check ok: %d ranks, 1 B to %d B echoed, allreduce and broadcast\n",
		       nranks, MAX_MSG);
	free(buf);
	MPI_Finalize();
	return 0;
}
