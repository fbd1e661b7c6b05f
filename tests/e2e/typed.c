/* SPDX-License-Identifier: MIT */
/*
 * A client of libpimclient's typed calls, as a C program (or a ctypes script) writes one: no
 * protobuf.  Usage: e2e-typed SOCKET MODEL
 * Prints the placement of MODEL at 128 PIM cores, one line per region ("ID NAME pim|host
 * REASON"), then checks it against the decision table of pim_decisions_get().  Exit 0, or 1
 * with the failure on stderr.
 */
#include <stdio.h>

#include "pim.h"

int main(int argc, char **argv)
{
	pim_client *c = pim_client_new();
	struct pim_placement *p;
	struct pim_decisions *d;
	struct pim_placement_request rq = { .params = { .n_core = 128 } };

	if (argc != 3 || !c || pim_client_connect(c, argv[1], "e2e-typed") < 0 ||
	    pim_placement_get(c, argv[2], &rq, &p) < 0 || pim_decisions_get(c, argv[2], &rq, &d) < 0) {
		fprintf(stderr, "e2e-typed: %s\n", c ? pim_client_error(c) : "out of memory");
		return 1;
	}
	const struct pim_placement_estimate *e = &p->estimates[0];
	printf("%s: %u of %zu regions on PIM at %g cores, speedup %.3f\n", p->model, e->offloaded, e->n_regions,
	       e->n_core, e->speedup);
	int bad = p->n_estimates != 1 || d->offloaded != e->offloaded;
	for (size_t i = 0; i < e->n_regions; i++) {
		const struct pim_region_decision *r = &e->regions[i];
		printf("%u %s %s %s\n", r->region_id, r->name, r->pim ? "pim" : "host", r->reason);
		bad |= r->region_id >= d->id_limit || d->place[r->region_id] != (r->pim ? PIM_ON_PIM : PIM_ON_HOST);
	}
	if (bad)
		fprintf(stderr, "e2e-typed: the placement and the decision table disagree\n");
	pim_decisions_free(d);
	pim_placement_free(p);
	pim_client_free(c);
	return bad;
}
