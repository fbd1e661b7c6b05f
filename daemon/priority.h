/* SPDX-License-Identifier: MIT */
/*
 * priority.h: pimd's nice values.  Every request waits for the event loop (read, answered or
 * handed over, its answer sent) and every change for the writer thread as well; on a host whose
 * cores the clients' own processes keep busy, both would wait for a CPU behind them, and the
 * writer behind the loop.  Where pimd may (root, CAP_SYS_NICE, or an RLIMIT_NICE of 20 - the
 * value: pimd.service's LimitNICE=-10), the loop runs PRIORITY_LOOP_BOOST and the writer
 * PRIORITY_WRITER_BOOST nice values below pimd's own; every other thread and every process pimd
 * starts runs at pimd's own (a profiled model at 0 or above as well: worker_helper.c).  The
 * loop's thread starts the others, so each sets its own on starting.
 */
#ifndef PIMD_PRIORITY_H
#define PIMD_PRIORITY_H

#include <stdbool.h>

#define PRIORITY_LOOP_BOOST 5
#define PRIORITY_WRITER_BOOST 10

/* From the event loop's thread, before it starts any thread or process: records pimd's nice
 * value (the thread's) and lowers the thread's by PRIORITY_LOOP_BOOST; where that is refused,
 * says so once (notice) and leaves it.  false: refused. */
bool priority_boost_loop(void);
/* pimd's nice value: recorded by priority_boost_loop, else the calling thread's. */
int priority_base(void);
/* The calling thread at pimd's nice value plus more (at most 19): a thread the loop started. */
void priority_unboost(int more);
/* The calling thread (the writer) PRIORITY_WRITER_BOOST below pimd's nice value, or as far as
 * it may (the loop's at least, inherited); says so once when it may not. */
void priority_boost_writer(void);

#endif
