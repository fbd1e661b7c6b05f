/* SPDX-License-Identifier: MIT */
/*
 * pimclient_priv.h: what the files of libpimclient share and its users never see: the handle
 * and its one round trip.  pimclient.c owns the connection; pimclient_typed.c (placement,
 * decisions, calibration, imports, the B_cpu probe, the catalogue), pimclient_model.c (models
 * loaded from JSON and shown) and pimclient_mx.c (MX tensors in frame-sized parts) convert
 * between pim.h's structs and pim.proto on top of it.
 */
#ifndef PIMCLIENT_PRIV_H
#define PIMCLIENT_PRIV_H

#include <pthread.h>
#include <stdint.h>
#include <sys/un.h>

#include "pim.h"
#include "pim.pb-c.h"

struct pim_client {
	pthread_mutex_t lock;
	int fd;
	uint64_t next_id;
	uint32_t max_frame;    /* the daemon's max_frame_bytes from Hello */
	int timeout_ms;        /* pim_client_set_timeout's, of this connection; -1: none */
	int remote;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char server_version[32];
	char error[512];
};

/* Records the message of a failure and returns code; c->remote becomes PIM_REMOTE_NONE. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
int pimclient_fail(pim_client *c, int code, const char *fmt, ...);

/* One request and its answer of body case want (c->lock held); an Error answer is a failure
 * with its message and code.  *out to free with pim__response__free_unpacked. */
int pimclient_call_fd(pim_client *c, Pim__Request *req, int pass_fd, Pim__Response__BodyCase want,
		      Pim__Response **out);
int pimclient_call(pim_client *c, Pim__Request *req, Pim__Response__BodyCase want, Pim__Response **out);

void pimclient_copy_str(char *dst, size_t cap, const char *src);
/* A model's summary of the wire as pim.h's (all 0 when s is NULL). */
void pimclient_info_from_wire(struct pim_model_info *info, const Pim__ModelSummary *s);
/* A region's metrics of the wire as pim.h's (strings borrowed from w). */
void pimclient_metrics_from_wire(struct pim_region_metrics *m, const Pim__RegionMetrics *w);
/* A probe of the wire as pim.h's (strings borrowed from b; all 0 and NULL when b is NULL). */
void pimclient_probe_from_wire(struct pim_bandwidth_probe *p, const Pim__BandwidthProbe *b);

#endif
