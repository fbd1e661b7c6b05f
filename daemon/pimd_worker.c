/* SPDX-License-Identifier: MIT */
/*
 * pimd_worker.c: pimd-worker, the program a profiling worker executes to run a model library in
 * a fresh image (worker.h). pimd starts it with the job, the library and the result pipe as
 * file descriptors; it is not run by hand.
 */
#include "worker.h"

int main(void)
{
	worker_helper_main();
}
