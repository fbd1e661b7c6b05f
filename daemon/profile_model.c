/* SPDX-License-Identifier: MIT */
/* profile_model.c: reading a job's model from the store (on a work thread): its regions, their
 * facts; and the events to count. */
#include "profile_int.h"

#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timerfd.h>

#include "log.h"
#include "manifest.h"
#include "metrics.h"
#include "placement.h"
#include "rpc.h"
#include "worker.h"

/*
 * Reading a job's model from the store a region at a time, regions by id (a manifest of a
 * million regions would take hundreds of MiB as protobuf-c structures): the arguments' sizes,
 * every region id with its unique read bytes, and the manifest's digest (manifest_digest()).
 * The region read last is kept until the next comes, or the walk ends (job_read_flush).
 */
struct job_reader {
	struct job *j;
	size_t n_allocations, n_regions; /* the model's, from its summary */
	size_t allocations_seen, regions_seen, args_cap;
	uint64_t h;
	struct rpc_region_msg m;
	bool pending;
	struct pim_error *err;
};

static void job_read_flush(struct job_reader *jr);
static int job_read_allocation(void *ctx, const struct store_allocation *a);
static int job_read_region(void *ctx, size_t index, const struct store_region *r);
static int job_read_operand(void *ctx, size_t region, const struct store_operand *o);
static int job_read_model(struct job *j, struct store *st, const char *name, struct pim_error *err);

/* Counter groups from the platform's event table, planned without multiplexing. */
void profile_plan_events(struct job *j, const struct platform *p)
{
	unsigned n = 0;
	struct pim_error err = { 0 };

	j->n_groups = 0;
	if (!p->counters || !p->table)
		return;
	for (int role = 0; role < EVENTS_ROLE_MAX; role++) {
		char name[256];
		if (events_full_name(p->table, NULL, (enum events_role)role, false, name, sizeof name, &err) < 0)
			continue;
		if (counters_encode_event(name, &j->events[n].attr, &err) < 0) {
			log_warning("Event %s does not encode: %s", name, err.msg);
			continue;
		}
		j->events[n].name = p->table->event[role];
		j->role_of[n] = role;
		n++;
	}
	struct counters_plan plan;
	if (n == 0 || counters_plan_groups(j->events, n, 4, &plan, &err) < 0)
		return;
	for (unsigned g = 0; g < plan.n_groups; g++)
		j->groups[g] = (struct worker_group){ &j->events[plan.first[g]], plan.count[g] };
	j->n_groups = plan.n_groups;
}

/* Unique read bytes of a region: its distinct allocations read (in, inout). */
uint64_t profile_read_bytes(Pim__Operand *const *ops, size_t n)
{
	uint64_t bytes = 0;

	for (size_t a = 0; a < n; a++) {
		const Pim__Operand *o = ops[a];
		if (o->role == PIM__OPERAND_ROLE__OPERAND_ROLE_OUT)
			continue;
		bool seen = false;
		for (size_t b = 0; b < a && !seen; b++)
			seen = ops[b]->allocation_id == o->allocation_id &&
			       ops[b]->role != PIM__OPERAND_ROLE__OPERAND_ROLE_OUT;
		if (!seen)
			bytes += o->bytes;
	}
	return bytes;
}

static void job_read_flush(struct job_reader *jr)
{
	if (!jr->pending)
		return;
	jr->h = manifest_digest_region(jr->h, &jr->m.g);
	jr->j->facts[jr->regions_seen - 1].profile_read_bytes = profile_read_bytes(jr->m.g.operands, jr->m.g.n_operands);
	jr->pending = false;
}

static int job_read_allocation(void *ctx, const struct store_allocation *a)
{
	struct job_reader *jr = ctx;
	struct job *j = jr->j;
	Pim__Allocation w;

	if (++jr->allocations_seen > jr->n_allocations)
		return err_set(jr->err, -EIO, "the model has more allocations than its summary says");
	rpc_allocation_to_wire(a, &w); /* what manifest_digest_allocation reads */
	jr->h = manifest_digest_allocation(jr->h, &w);
	if (a->kind != STORE_ALLOC_ARGUMENT)
		return 0;
	if (j->n_args == WORKER_ARGS_MAX)
		return err_set(jr->err, -EINVAL, "the model has more than %u arguments; a worker takes at most %u",
			       WORKER_ARGS_MAX, WORKER_ARGS_MAX);
	if (j->n_args == jr->args_cap) {
		size_t cap = jr->args_cap ? 2 * jr->args_cap : 16;
		uint64_t *v = realloc(j->arg_bytes, cap * sizeof *v);
		if (!v)
			return err_set(jr->err, -ENOMEM, "out of memory");
		j->arg_bytes = v;
		jr->args_cap = cap;
	}
	j->arg_bytes[j->n_args++] = a->bytes; /* allocations come by id: the arguments' order */
	return 0;
}

static int job_read_region(void *ctx, size_t index, const struct store_region *r)
{
	struct job_reader *jr = ctx;

	job_read_flush(jr);
	if (jr->regions_seen == 0)
		jr->h = manifest_digest_regions(jr->h, jr->n_regions);
	if (index >= jr->n_regions)
		return err_set(jr->err, -EIO, "the model has more regions than its summary says");
	if (r->id > WORKER_REGION_ID_MAX)
		return err_set(jr->err, -EINVAL, "region id %u exceeds %d, the largest a worker tracks", r->id,
			       WORKER_REGION_ID_MAX);
	jr->regions_seen = index + 1;
	jr->j->regions[index] = (int32_t)r->id;
	jr->j->facts[index] = (struct region_fact){ (int32_t)r->id, 0 };
	rpc_region_msg_start(&jr->m, r); /* what manifest_digest_region reads */
	jr->pending = true;
	return 0;
}

static int job_read_operand(void *ctx, size_t region, const struct store_operand *o)
{
	struct job_reader *jr = ctx;

	if (!rpc_region_msg_operand(&jr->m, o))
		return err_set(jr->err, -EIO, "region %u has more than %u operands", jr->m.g.id,
			       MANIFEST_OPERANDS_MAX);
	return 0;
}

/* The job's arguments, regions and facts from the stored model (inside a read transaction). */
static int job_read_model(struct job *j, struct store *st, const char *name, struct pim_error *err)
{
	static const struct store_model_walker walker = { .allocation = job_read_allocation,
							  .region = job_read_region,
							  .operand = job_read_operand,
							  .by_id = true };
	struct store_model_info sum;
	struct job_reader *jr;
	int k = store_model_get(st, name, &sum, NULL, err);

	if (k < 0)
		return k;
	jr = calloc(1, sizeof *jr);
	j->regions = calloc(sum.regions ? sum.regions : 1, sizeof *j->regions);
	j->facts = calloc(sum.regions ? sum.regions : 1, sizeof *j->facts);
	if (!jr || !j->regions || !j->facts) {
		k = err_set(err, -ENOMEM, "out of memory");
	} else {
		*jr = (struct job_reader){ .j = j, .n_allocations = sum.allocations, .n_regions = sum.regions,
					   .h = manifest_digest_begin(sum.allocations), .err = err };
		k = store_model_walk(st, j->model_id, &walker, jr, err);
		job_read_flush(jr);
		if (k >= 0 && (jr->regions_seen != jr->n_regions || jr->allocations_seen != jr->n_allocations))
			k = err_set(err, -EIO, "model \"%s\": %zu regions and %zu allocations stored, its summary "
				    "says %zu and %zu", name, jr->regions_seen, jr->allocations_seen,
				    jr->n_regions, jr->n_allocations);
		if (k >= 0 && jr->regions_seen == 0)
			jr->h = manifest_digest_regions(jr->h, 0);
		j->digest = manifest_digest_end(jr->h);
		j->n_regions = j->n_facts = jr->regions_seen; /* by id: facts are sorted */
	}
	if (k == -ENOMEM && !err->msg[0])
		err_set(err, -ENOMEM, "out of memory");
	free(jr);
	store_model_info_clear(&sum);
	return k;
}

/* On a work thread (j is nobody else's yet): the id of j's model (j->model, which j->uid must
 * be allowed to use for what: store_model_id_for), its arguments, regions and facts from the
 * store s, and what to measure: the n_measure region ids in measure (all when 0). */
int profile_job_from_store(struct job *j, struct store *s, const char *what, const uint32_t *measure,
			   size_t n_measure, struct pim_error *err)
{
	int k = store_read_begin(s, err); /* (the id and the rows of one state of the store) */

	if (k < 0)
		return k;
	if ((k = store_model_id_for(s, j->model, j->uid, what, &j->model_id, err)) >= 0)
		k = job_read_model(j, s, j->model, err);
	store_read_end(s);
	if (k < 0)
		return k;
	if (n_measure) {
		j->measure = calloc(n_measure, sizeof *j->measure);
		if (!j->measure)
			return err_set(err, -ENOMEM, "out of memory");
		for (size_t i = 0; i < n_measure; i++) {
			if (measure[i] > INT32_MAX || !profile_fact_of(j, (int32_t)measure[i]))
				return err_set(err, -EINVAL, "regions[%zu]: the model has no region %u", i,
					       measure[i]);
			j->measure[i] = (int32_t)measure[i];
		}
		j->n_measure = n_measure;
	}
	return 0;
}
