/* SPDX-License-Identifier: MIT */
/*
 * server.h: the transport of pimd: the listening socket and the client connections, framing,
 * per-connection limits and peer credentials.  Each decoded request is answered where
 * dispatch.h's table says: here, with rpc.c, or on the threads beside the loop (threads.h).
 */
#ifndef PIMD_SERVER_H
#define PIMD_SERVER_H

#include "config.h"
#include "loop.h"
#include "rpc.h"

struct server;

/*
 * Takes the listening socket from systemd (sd_listen_fds) or binds cfg->socket_path itself
 * (mode 0660, refusing to steal the socket of a running pimd, replacing a stale one).
 * Requests are answered in ctx (rpc_context_init), which the server counts its clients and
 * requests in and which must outlive it.
 */
int server_new(struct loop *loop, const struct config *cfg, struct rpc_context *ctx,
	       struct server **out, struct pim_error *err);
void server_free(struct server *s);

/* Applies reloadable limits (max_clients, frame and pending limits) from a new config; the
 * request context takes its own share (rpc_context_apply_config). */
void server_apply_config(struct server *s, const struct config *cfg);

/* The writer thread (threads.h) as a store_writer (store_write_via), valid until server_free:
 * what was handed over before it is freed is written first. */
struct store_writer server_writer(struct server *s);

bool server_socket_activated(const struct server *s);
unsigned server_clients(const struct server *s);

/* Called whenever the number of clients or models may have changed (for STATUS=). */
void server_set_change_hook(struct server *s, void (*fn)(struct server *s, void *data), void *data);

#endif
