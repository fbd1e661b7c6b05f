/* SPDX-License-Identifier: MIT */
/*
 * libpimclient's MX quantization calls: a tensor goes to pimd in frame-sized parts and the
 * answers are joined.  The packed layout (pimd(8), "Quantization"; daemon/mx.h) keeps the
 * blocks of a row of a row-blocked tensor, and of a column of a column-blocked one, together:
 * a part is a run of whole rows (row blocking) or whole columns (column blocking).  Column parts
 * are gathered from (quantize) or scattered into (dequantize) the row-major raw tensor here.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pimclient_priv.h"

/* Room in a frame for everything but the tensor: envelope, ids, strings. */
#define FRAME_SLACK 4096u

/* The formats pimd knows, with their block (elements) and packed block (bytes). */
static const struct mx_shape {
	const char *name;
	unsigned block, block_bytes;
} mx_shapes[] = {
	{ "mx9", 16, 18 }, { "mx6", 16, 12 }, { "mx4", 16, 8 },
	{ "mxfp8-e4m3", 32, 33 }, { "mxfp8-e5m2", 32, 33 }, { "mxfp6-e3m2", 32, 25 },
	{ "mxfp6-e2m3", 32, 25 }, { "mxfp4", 32, 17 }, { "mxint8", 32, 33 },
};

static const struct mx_shape *shape_of(const char *format)
{
	if (!format || !*format)
		format = "mx6";
	for (size_t i = 0; i < sizeof mx_shapes / sizeof mx_shapes[0]; i++)
		if (strcasecmp(format, mx_shapes[i].name) == 0)
			return &mx_shapes[i];
	return NULL;
}

/* How a tensor divides into parts: lines (rows or columns) of line_len elements. */
struct split {
	bool col;               /* column blocking: a line is a column */
	size_t lines, line_len;
	size_t raw_line;        /* bytes of a line of the raw tensor (FP32 or BF16 elements) */
	size_t packed_line;     /* bytes of a line packed */
	size_t per_part;        /* lines per request; lines when it is one request */
};

/*
 * Plans the parts of rq (raw_elem: bytes of a raw element), or answers 1 with one request left
 * to pimd as it is (a format, direction or shape pimd will refuse and explain, or a tensor
 * that fits a frame as a whole).  Negative errno when a single line does not fit.
 */
static int split_plan(pim_client *c, const struct pim_jitq_tensor_request *rq, size_t raw_elem, bool quantize,
		      struct split *sp)
{
	const struct mx_shape *f = shape_of(rq->format);
	const char *d = rq->direction;

	if (!f || !rq->rows || !rq->cols)
		return 1;
	if (d && *d && strcmp(d, "row") != 0 && strcmp(d, "col") != 0 && strcmp(d, "column") != 0)
		return 1;
	sp->col = d && *d && strcmp(d, "row") != 0;
	sp->lines = sp->col ? rq->cols : rq->rows;
	sp->line_len = sp->col ? rq->rows : rq->cols;
	if (sp->line_len % f->block)
		return 1;
	sp->raw_line = sp->line_len * raw_elem;
	sp->packed_line = sp->line_len / f->block * f->block_bytes;
	size_t in_line = quantize ? sp->raw_line : sp->packed_line;
	/* whole tensor of the wrong size: pimd says what it expected */
	if ((uint64_t)sp->lines * in_line != rq->len)
		return 1;
	size_t line = sp->raw_line > sp->packed_line ? sp->raw_line : sp->packed_line;
	size_t room = c->max_frame > FRAME_SLACK ? c->max_frame - FRAME_SLACK : 0;
	if (line > room)
		return pimclient_fail(c, -EMSGSIZE,
				      "one %s of %zu elements needs %zu bytes, more than a frame of %u bytes "
				      "(max_frame_bytes) carries", sp->col ? "column" : "row", sp->line_len,
				      line, c->max_frame);
	sp->per_part = room / line;
	if (sp->per_part >= sp->lines)
		return 1;
	return 0;
}

void pim_jitq_tensor_free(struct pim_jitq_tensor *t)
{
	if (!t)
		return;
	free(t->data);
	free(t);
}

/* One request of the tensor (or of a part: rows x cols, data, len); its answer in *resp. */
static int quantize_part(pim_client *c, const struct pim_jitq_tensor_request *rq, uint32_t rows, uint32_t cols,
			 const void *data, size_t len, Pim__Response **resp)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__JitqQuantize body = PIM__JITQ_QUANTIZE__INIT;

	if (rq->format)
		body.format = (char *)rq->format;
	if (rq->source)
		body.source = (char *)rq->source;
	if (rq->direction)
		body.direction = (char *)rq->direction;
	if (rq->engine)
		body.engine = (char *)rq->engine;
	if (rq->kernel)
		body.kernel = (char *)rq->kernel;
	body.rows = rows;
	body.cols = cols;
	body.data.data = (uint8_t *)data;
	body.data.len = len;
	req.body_case = PIM__REQUEST__BODY_JITQ_QUANTIZE;
	req.jitq_quantize = &body;
	return pimclient_call(c, &req, PIM__RESPONSE__BODY_JITQ_QUANTIZE, resp);
}

static int dequantize_part(pim_client *c, const struct pim_jitq_tensor_request *rq, uint32_t rows,
			   uint32_t cols, const void *data, size_t len, Pim__Response **resp)
{
	Pim__Request req = PIM__REQUEST__INIT;
	Pim__JitqDequantize body = PIM__JITQ_DEQUANTIZE__INIT;

	if (rq->format)
		body.format = (char *)rq->format;
	if (rq->direction)
		body.direction = (char *)rq->direction;
	body.rows = rows;
	body.cols = cols;
	body.data.data = (uint8_t *)data;
	body.data.len = len;
	req.body_case = PIM__REQUEST__BODY_JITQ_DEQUANTIZE;
	req.jitq_dequantize = &body;
	return pimclient_call(c, &req, PIM__RESPONSE__BODY_JITQ_DEQUANTIZE, resp);
}

/* A part's answer: its data must be exactly want bytes. */
static int part_data(pim_client *c, const ProtobufCBinaryData *d, size_t want)
{
	if (d->len != want)
		return pimclient_fail(c, -EBADMSG, "pimd answered a part with %zu bytes, %zu expected", d->len,
				      want);
	return 0;
}

static int tensor_new(pim_client *c, size_t len, struct pim_jitq_tensor **out)
{
	struct pim_jitq_tensor *t = calloc(1, sizeof *t);
	if (t)
		t->data = malloc(len ? len : 1);
	if (!t || !t->data) {
		free(t);
		return pimclient_fail(c, -ENOMEM, "out of memory for a %zu-byte tensor", len);
	}
	t->len = len;
	*out = t;
	return 0;
}

/* A failure of part i of n says which part failed. */
static int part_failed(pim_client *c, int r, size_t i, size_t n)
{
	char msg[sizeof c->error];
	int remote = c->remote;

	snprintf(msg, sizeof msg, "%s", c->error);
	pimclient_fail(c, r, "part %zu of %zu: %s", i + 1, n, msg);
	c->remote = remote;
	return r;
}

int pim_jitq_quantize(pim_client *c, const struct pim_jitq_tensor_request *rq, struct pim_jitq_tensor **out)
{
	bool fp32 = rq->source && strcasecmp(rq->source, "fp32") == 0;
	bool pim = rq->engine && *rq->engine && strcmp(rq->engine, "reference") != 0;
	struct pim_jitq_tensor *t = NULL;
	Pim__Response *resp;
	struct split sp;
	uint8_t *gather = NULL;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	r = pim ? 1 : split_plan(c, rq, fp32 ? 4 : 2, true, &sp);
	if (r < 0)
		goto out;
	if (r == 1) {
		if ((r = quantize_part(c, rq, rq->rows, rq->cols, rq->data, rq->len, &resp)) < 0)
			goto out;
		const Pim__JitqQuantizeReply *q = resp->jitq_quantize;
		if ((r = tensor_new(c, q->data.len, &t)) == 0) {
			memcpy(t->data, q->data.data, q->data.len);
			t->blocks = q->blocks;
			pimclient_copy_str(t->engine, sizeof t->engine, q->engine);
			t->pim_time_ns = q->pim_time_ns;
			t->pim_commands = q->pim_commands;
			t->requests = 1;
		}
		pim__response__free_unpacked(resp, NULL);
		goto out;
	}
	size_t parts = (sp.lines + sp.per_part - 1) / sp.per_part;
	if ((r = tensor_new(c, sp.lines * sp.packed_line, &t)) < 0)
		goto out;
	if (sp.col && !(gather = malloc(sp.per_part * sp.raw_line))) {
		r = pimclient_fail(c, -ENOMEM, "out of memory");
		goto out;
	}
	size_t elem = fp32 ? 4 : 2;
	for (size_t i = 0; i < parts && r == 0; i++) {
		size_t first = i * sp.per_part, k = sp.lines - first < sp.per_part ? sp.lines - first : sp.per_part;
		const uint8_t *src = (const uint8_t *)rq->data + first * sp.raw_line;
		if (sp.col) {
			/* columns first..first+k of the row-major tensor, as a rows x k tensor */
			for (size_t row = 0; row < rq->rows; row++)
				memcpy(gather + row * k * elem,
				       (const uint8_t *)rq->data + (row * rq->cols + first) * elem, k * elem);
			src = gather;
		}
		r = quantize_part(c, rq, sp.col ? rq->rows : (uint32_t)k, sp.col ? (uint32_t)k : rq->cols, src,
				  k * sp.raw_line, &resp);
		if (r < 0) {
			part_failed(c, r, i, parts);
			break;
		}
		const Pim__JitqQuantizeReply *q = resp->jitq_quantize;
		if ((r = part_data(c, &q->data, k * sp.packed_line)) == 0) {
			memcpy((uint8_t *)t->data + first * sp.packed_line, q->data.data, q->data.len);
			t->blocks += q->blocks;
			pimclient_copy_str(t->engine, sizeof t->engine, q->engine);
			t->requests++;
		}
		pim__response__free_unpacked(resp, NULL);
	}
out:
	free(gather);
	if (r < 0)
		pim_jitq_tensor_free(t);
	else
		*out = t, r = 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}

int pim_jitq_dequantize(pim_client *c, const struct pim_jitq_tensor_request *rq, struct pim_jitq_tensor **out)
{
	struct pim_jitq_tensor *t = NULL;
	Pim__Response *resp;
	struct split sp;
	int r;

	*out = NULL;
	pthread_mutex_lock(&c->lock);
	r = split_plan(c, rq, sizeof(float), false, &sp);
	if (r < 0)
		goto out;
	if (r == 1) {
		if ((r = dequantize_part(c, rq, rq->rows, rq->cols, rq->data, rq->len, &resp)) < 0)
			goto out;
		const Pim__JitqDequantizeReply *q = resp->jitq_dequantize;
		if ((r = tensor_new(c, q->data.len, &t)) == 0) {
			memcpy(t->data, q->data.data, q->data.len);
			t->blocks = q->blocks;
			t->nan_blocks = q->nan_blocks;
			t->requests = 1;
		}
		pim__response__free_unpacked(resp, NULL);
		goto out;
	}
	size_t parts = (sp.lines + sp.per_part - 1) / sp.per_part;
	if ((r = tensor_new(c, (size_t)rq->rows * rq->cols * sizeof(float), &t)) < 0)
		goto out;
	for (size_t i = 0; i < parts && r == 0; i++) {
		size_t first = i * sp.per_part, k = sp.lines - first < sp.per_part ? sp.lines - first : sp.per_part;
		r = dequantize_part(c, rq, sp.col ? rq->rows : (uint32_t)k, sp.col ? (uint32_t)k : rq->cols,
				    (const uint8_t *)rq->data + first * sp.packed_line, k * sp.packed_line, &resp);
		if (r < 0) {
			part_failed(c, r, i, parts);
			break;
		}
		const Pim__JitqDequantizeReply *q = resp->jitq_dequantize;
		if ((r = part_data(c, &q->data, k * sp.raw_line)) == 0) {
			if (sp.col) /* a rows x k FP32 tensor: into columns first..first+k */
				for (size_t row = 0; row < rq->rows; row++)
					memcpy((uint8_t *)t->data + (row * rq->cols + first) * sizeof(float),
					       q->data.data + row * k * sizeof(float), k * sizeof(float));
			else
				memcpy((uint8_t *)t->data + first * sp.raw_line, q->data.data, q->data.len);
			t->blocks += q->blocks;
			t->nan_blocks += q->nan_blocks;
			t->requests++;
		}
		pim__response__free_unpacked(resp, NULL);
	}
out:
	if (r < 0)
		pim_jitq_tensor_free(t);
	else
		*out = t, r = 0;
	pthread_mutex_unlock(&c->lock);
	return r;
}
