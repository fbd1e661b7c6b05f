/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: one frame payload as the daemon receives it — decoded as a Request (measured
 * first, under the same budget as pimd's, its strings checked on the way, decode.c) and
 * answered by rpc_handle() against a real store — so the decoder, manifest validation and the
 * store's handling of anything a client can send are covered, as in server.c; and what the
 * event loop takes as a Status on the wire (decode_status_request) must decode as one, with
 * the same id.  Built by "make fuzz" (libFuzzer) and, with
 * tests/fuzz/replay.c, by "make check" to replay the corpus.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode.h"
#include "log.h"
#include "loop.h"
#include "manifest.h"
#include "pimsim.h"
#include "platform.h"
#include "profile.h"
#include "rpc.h"
#include "store.h"

static struct store *store;
static struct rpc_context ctx;
static struct platform platform;
static struct pimsim_params pim;
static struct config cfg;
static struct loop *loop;
static struct profiler *profiler;
static char dir[] = "/tmp/pimd-fuzz-XXXXXX";

static void cleanup(void)
{
	char cmd[64];
	profiler_free(profiler);
	loop_free(loop);
	store_close(store);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static void init(void)
{
	char path[64];
	struct pim_error err = { 0 };

	if (!mkdtemp(dir))
		abort();
	atexit(cleanup);
	snprintf(path, sizeof path, "%s/pimd.db", dir);
	if (store_open(path, 1000, &store, &err) < 0)
		abort();
	log_set_level(LOG_CRIT);
	/* The context pimd builds, the same way: a platform, the default configuration and PIM
	 * model, a profiler. */
	platform_detect(&platform, &err);
	platform.id.b_cpu = 10e9;
	if (store_platform_ensure(store, &platform.id, &platform.row, &err) < 0)
		abort();
	config_init(&cfg);
	pimsim_params_default(&pim);
	if (loop_new(&loop) < 0 || profiler_new(loop, store, &platform, &cfg, &profiler, &err) < 0)
		abort();
	rpc_context_init(&ctx, store, &platform, &cfg, &pim, profiler);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rpc_peer peer = { .hello_done = true, .cred = { .uid = 1000 }, .passed_fd = -1 };
	enum rpc_after after;
	struct decode_budget budget;
	struct pim_error err = { 0 }, text = { 0 };
	Pim__Request *req;

	if (!store)
		init();
	/* what the loop answers as a Status on the wire is a Status to decode_request too */
	uint64_t status_id;
	bool status = decode_status_request(data, size, &status_id);
	if (decode_request(data, size, &budget, &req, &text, &err) < 0) {
		if (status)
			abort();
		return 0;
	}
	if (status && (req->body_case != PIM__REQUEST__BODY_STATUS || req->id != status_id))
		abort();
	/* As in the daemon, a request with a bad string does not reach the handlers. */
	if (text.code < 0) {
		pim__request__free_unpacked(req, &budget.alloc);
		return 0;
	}
	/* both connection states: before and after Hello */
	peer.hello_done = size & 1;
	Pim__Response *resp = rpc_handle(&ctx, &peer, req, &after, NULL);
	if (resp) {
		size_t n = pim__response__get_packed_size(resp);
		uint8_t *buf = malloc(n + 1);
		pim__response__pack(resp, buf);
		free(buf);
		pim__response__free_unpacked(resp, NULL);
	}
	pim__request__free_unpacked(req, &budget.alloc);
	rpc_peer_closed(&ctx, &peer);
	return 0;
}
