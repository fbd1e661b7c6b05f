/* SPDX-License-Identifier: MIT */
/*
 * bench_decided: cost of the client's decided path, pim_model_region_enter() +
 * pim_model_region_exit(), against an empty non-inlined call pair measured in the same run
 * (goal: at most 2x).  Starts a private pimd (argv[1], default build/pimd), loads a
 * 4096-region model, opens its decisions through libpimclient and times 50 million pairs per
 * round, alternating with the empty pair.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "manifest.h"
#include "pim.h"

#define REGIONS 4096
#define PAIRS 50000000u
#define ROUNDS 7

__attribute__((noinline)) static int empty_enter(void *m, uint32_t r)
{
	__asm__ volatile("" : : "r"(m), "r"(r) : "memory");
	return 0;
}

__attribute__((noinline)) static void empty_exit(void *m, uint32_t r)
{
	__asm__ volatile("" : : "r"(m), "r"(r) : "memory");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static Pim__Manifest *synthetic(void)
{
	Pim__Manifest *m = calloc(1, sizeof *m);
	pim__manifest__init(m);
	m->name = strdup("bench-decided");
	m->source = strdup("bench_decided");
	m->n_allocations = 1;
	m->allocations = calloc(1, sizeof *m->allocations);
	m->allocations[0] = calloc(1, sizeof(Pim__Allocation));
	pim__allocation__init(m->allocations[0]);
	m->allocations[0]->id = 0;
	m->allocations[0]->bytes = 4096;
	m->allocations[0]->kind = PIM__ALLOC_KIND__ALLOC_KIND_ALLOC;
	m->allocations[0]->name = strdup("buf");
	m->regions = calloc(REGIONS, sizeof *m->regions);
	for (uint32_t i = 0; i < REGIONS; i++) {
		Pim__Region *r = calloc(1, sizeof *r);
		pim__region__init(r);
		r->id = i;
		r->name = strdup("r");
		r->op = strdup("linalg.generic");
		r->location = strdup("");
		r->order = i;
		r->n_par = r->n_total = 1024;
		r->trip = 1;
		r->operands = calloc(1, sizeof *r->operands);
		r->operands[0] = calloc(1, sizeof(Pim__Operand));
		pim__operand__init(r->operands[0]);
		r->operands[0]->allocation_id = 0;
		r->operands[0]->bytes = 4096;
		r->operands[0]->role = PIM__OPERAND_ROLE__OPERAND_ROLE_INOUT;
		r->n_operands = 1;
		m->regions[m->n_regions++] = r;
	}
	return m;
}

int main(int argc, char **argv)
{
	const char *pimd = argc > 1 ? argv[1] : "build/pimd";
	char dir[] = "/tmp/pimd-bench-XXXXXX", sock[128], state[128], cmd[200];
	struct pim_error err = { 0 };

	if (!mkdtemp(dir))
		return 1;
	snprintf(sock, sizeof sock, "%s/s", dir);
	snprintf(state, sizeof state, "%s/state", dir);
	pid_t pid = fork();
	if (pid == 0) {
		execl(pimd, pimd, "--foreground", "--socket", sock, "--state-dir", state, "--log-level",
		      "warning", (char *)NULL);
		_exit(127);
	}
	pim_client *c = pim_client_new();
	int r = -1;
	/* up to 60 s: a first start measures B_cpu, slow on a loaded machine */
	for (int i = 0; i < 3000 && (r = pim_client_connect(c, sock, "bench_decided")) < 0; i++)
		usleep(20000);
	if (r < 0) {
		fprintf(stderr, "bench_decided: %s\n", pim_client_error(c));
		return 1;
	}
	Pim__Manifest *m = synthetic();
	if (manifest_validate(m, &err) < 0) {
		fprintf(stderr, "bench_decided: %s\n", err.msg);
		return 1;
	}
	size_t len = pim__manifest__get_packed_size(m);
	uint8_t *buf = malloc(len);
	pim__manifest__pack(m, buf);
	pim_model *pm;
	if (pim_model_load(c, buf, len, 0, NULL, NULL) < 0 || pim_model_open(c, "bench-decided", &pm) < 0) {
		fprintf(stderr, "bench_decided: %s\n", pim_client_error(c));
		return 1;
	}
	double t_api[ROUNDS], t_empty[ROUNDS];
	volatile int sink = 0;
	for (int round = 0; round < ROUNDS; round++) {
		for (int k = 0; k < 2; k++) {
			bool api = (round + k) % 2 == 0;
			double t0 = now_s();
			int acc = 0;
			if (api)
				for (uint32_t i = 0; i < PAIRS; i++) {
					uint32_t id = i & (REGIONS - 1);
					acc += pim_model_region_enter(pm, id);
					pim_model_region_exit(pm, id);
				}
			else
				for (uint32_t i = 0; i < PAIRS; i++) {
					uint32_t id = i & (REGIONS - 1);
					acc += empty_enter(pm, id);
					empty_exit(pm, id);
				}
			sink += acc;
			double ns = (now_s() - t0) * 1e9 / PAIRS;
			if (api)
				t_api[round] = ns;
			else
				t_empty[round] = ns;
		}
	}
	/* In-situ sampling on, at a rate that never samples in this run: the unsampled boundary. */
	double t_smp[ROUNDS];
	if (pim_model_sample(pm, sock, 1u << 30) < 0) {
		fprintf(stderr, "bench_decided: sampling: cannot start\n");
		return 1;
	}
	for (int round = 0; round < ROUNDS; round++) {
		double t0 = now_s();
		int acc = 0;
		for (uint32_t i = 0; i < PAIRS; i++) {
			uint32_t id = i & (REGIONS - 1);
			acc += pim_model_region_enter(pm, id);
			pim_model_region_exit(pm, id);
		}
		sink += acc;
		t_smp[round] = (now_s() - t0) * 1e9 / PAIRS;
	}
	pim_model_sample(pm, NULL, 0);
	qsort(t_smp, ROUNDS, sizeof *t_smp, cmp_d);
	qsort(t_api, ROUNDS, sizeof *t_api, cmp_d);
	qsort(t_empty, ROUNDS, sizeof *t_empty, cmp_d);
	double ratio = t_api[ROUNDS / 2] / t_empty[ROUNDS / 2];
	printf("decided path, %u regions, %u pairs x %d rounds (medians):\n", REGIONS, PAIRS, ROUNDS);
	printf("  pim_model_region_enter+exit  %6.2f ns/pair\n", t_api[ROUNDS / 2]);
	printf("  empty non-inlined call pair  %6.2f ns/pair\n", t_empty[ROUNDS / 2]);
	printf("  ratio %.2fx (goal <= 2x: %s); unknown ids seen: %llu\n", ratio,
	       ratio <= 2.0 ? "met" : "missed", (unsigned long long)pim_model_unknown_regions(pm));
	printf("  with in-situ sampling on, unsampled boundary: %.2f ns/pair (%.2fx the empty pair)\n",
	       t_smp[ROUNDS / 2], t_smp[ROUNDS / 2] / t_empty[ROUNDS / 2]);
	pim_model_close(pm);
	pim_client_free(c);
	pim__manifest__free_unpacked(m, NULL);
	free(buf);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		return 1;
	return sink == -1;
}
