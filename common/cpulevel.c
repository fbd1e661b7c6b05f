/* SPDX-License-Identifier: MIT */
#include "cpulevel.h"

#include <string.h>

static const struct {
	const char *name, *needs;
} LEVELS[] = {
	{ "x86-64-v4", "AVX-512 (F, BW, CD, DQ, VL)" },
	{ "x86-64-v3", "AVX2, FMA, BMI2" },
	{ "x86-64-v2", "SSE4.2, SSSE3, POPCNT" },
	{ "x86-64", "SSE2" },
};

#define N_LEVELS (sizeof LEVELS / sizeof LEVELS[0])

static int level_index(const char *level)
{
	for (unsigned i = 0; i < N_LEVELS; i++)
		if (level && !strcmp(level, LEVELS[i].name))
			return (int)i;
	return -1;
}

bool cpulevel_valid(const char *level)
{
	return level_index(level) >= 0;
}

const char *cpulevel_needs(const char *level)
{
	int i = level_index(level);
	return i < 0 ? "an unknown instruction set" : LEVELS[i].needs;
}

bool cpulevel_runs_here(const char *level)
{
	int i = level_index(level);

	if (i < 0)
		return false;
#if defined(__x86_64__)
	__builtin_cpu_init();
	bool v2 = __builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt") &&
		  __builtin_cpu_supports("ssse3");
	bool v3 = v2 && __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
		  __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi2");
	bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		  __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
		  __builtin_cpu_supports("avx512vl");
	const bool have[N_LEVELS] = { v4, v3, v2, true };
	return have[i];
#else
	return false;
#endif
}

const char *cpulevel_native(void)
{
	for (unsigned i = 0; i < N_LEVELS; i++)
		if (cpulevel_runs_here(LEVELS[i].name))
			return LEVELS[i].name;
	return "";
}
