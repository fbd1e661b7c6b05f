/* SPDX-License-Identifier: MIT */
/*
 * onnx.h: an ONNX ModelProto (what torch.onnx.export writes) to linalg-on-tensors MLIR text,
 * which extract.c then treats like any other input.
 *
 * The model is read with the protobuf-c code generated at build time from the onnx.proto of
 * Debian's libonnx-dev.  Every tensor shape is static: graph inputs with symbolic dimensions
 * must be pinned (onnx_parse_input_shape, --input-shape NAME=1x128).  Values known at import
 * (initializers, Constant nodes, and what is computed only from them and from shapes: the
 * Shape/Gather/Unsqueeze/Concat/... subgraphs an exporter adds) are folded in C; the rest
 * becomes linalg.generic ops (plus tensor.empty, tensor.pad, extract/insert_slice and
 * expand/collapse_shape).  Every op made for node N carries the location
 * loc("NAME"("OP_TYPE")): the node's name (OP_TYPE_<index> when unnamed) with its op type.
 * Initializers are arith.constant dense tensors, read from the model or from its external
 * data files (TensorProto.external_data, relative to the model's directory).  Element types:
 * float, double, float16, bfloat16, int64, int32, bool.
 *
 * A node, op type, attribute or type outside what is supported is refused with
 * "node NAME (OP_TYPE): ..." naming the attribute; the importer writes nothing then.  Op types
 * it lacks are found first and refused together: "N nodes are not supported (OP N, ...):
 * NAME (OP), ...".
 */
#ifndef PIM_COMPILER_ONNX_H
#define PIM_COMPILER_ONNX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util.h"

#define ONNX_RANK_MAX 8
#define ONNX_SHAPES_MAX 64
#define ONNX_NAME_MAX 255
#define ONNX_INPUT_MAX (1024u * 1024u * 1024u)  /* model file bytes */
#define ONNX_EXTERNAL_MAX (16ull << 30)          /* bytes of external data read, all tensors */

/* One --input-shape NAME=D0xD1x...: the static shape of a graph input. */
struct onnx_shape {
	char name[ONNX_NAME_MAX + 1];
	size_t rank;
	int64_t dims[ONNX_RANK_MAX];
};

/* One --const-input NAME=FILE.pb: graph input NAME is the constant FILE.pb holds (a
 * serialized TensorProto), folded at import like an initializer, not an argument. */
struct onnx_const_input {
	char name[ONNX_NAME_MAX + 1];
	const char *path;
};

struct onnx_options {
	const char *input;              /* the .onnx file */
	const struct onnx_shape *shapes;
	size_t n_shapes;
	const struct onnx_const_input *consts;
	size_t n_consts;
	/* --weights zero: a constant of at least this many bytes that an emitted op uses is
	 * written as a zero splat, dense<0.0> (the extractor then makes it a zeroed global), and
	 * an external-data initializer of that size is never read (only checked against its
	 * file), so the import's memory does not grow with the weights; 0 writes every
	 * constant's data. */
	uint64_t zero_min;
};

/* Parses "NAME=1x128" (or "NAME=" for a scalar); -EINVAL with a message otherwise. */
int onnx_parse_input_shape(const char *arg, struct onnx_shape *out, struct pim_error *err);

/* Parses "NAME=FILE.pb" (path points into arg); -EINVAL with a message otherwise. */
int onnx_parse_const_input(const char *arg, struct onnx_const_input *out, struct pim_error *err);

/* True when path names an ONNX model: it ends in ".onnx", or it starts like a serialized
 * ModelProto (field 1 ir_version as a varint) and not like MLIR text. */
bool onnx_is_model(const char *path);

/* Imports the model: *mlir is a NUL-terminated module (free()), *len its length.  Refusals
 * return -EINVAL with "FILE: node NAME (OP_TYPE): ..." in err. */
int onnx_import(const struct onnx_options *o, char **mlir, size_t *len, struct pim_error *err);

#endif
