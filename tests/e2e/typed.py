#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# libpimclient from Python through ctypes, no protobuf: a model's decision table with
# pim_decisions_get(); with MANIFEST.json, that manifest loaded from its JSON text with
# pim_model_load_json(), shown with pim_model_show_get() and checked against the file, a
# malformed copy refused with the parser's message, and the model removed.
# Usage: typed.py LIBPIMCLIENT_SO SOCKET MODEL [MANIFEST.json]
import ctypes
import json
import sys


class Decisions(ctypes.Structure):  # struct pim_decisions (pim.h)
    _fields_ = [("model", ctypes.c_char_p), ("id_limit", ctypes.c_uint32),
                ("offloaded", ctypes.c_uint32), ("evidence", ctypes.c_int),
                ("place", ctypes.POINTER(ctypes.c_uint8))]


class ModelInfo(ctypes.Structure):  # struct pim_model_info
    _fields_ = [("name", ctypes.c_char * 129), ("source", ctypes.c_char * 257),
                ("regions", ctypes.c_uint32), ("allocations", ctypes.c_uint32),
                ("owner_uid", ctypes.c_uint32), ("loaded_at", ctypes.c_int64),
                ("allocation_bytes", ctypes.c_uint64)]


class ModelLoaded(ctypes.Structure):  # struct pim_model_loaded
    _fields_ = [("info", ModelInfo), ("replaced", ctypes.c_int)]


class Allocation(ctypes.Structure):  # struct pim_model_allocation
    _fields_ = [("id", ctypes.c_uint32), ("bytes", ctypes.c_uint64), ("kind", ctypes.c_int),
                ("name", ctypes.c_char_p)]


class Operand(ctypes.Structure):  # struct pim_model_operand
    _fields_ = [("allocation_id", ctypes.c_uint32), ("bytes", ctypes.c_uint64),
                ("elem_type", ctypes.c_char_p), ("elem_bits", ctypes.c_uint32), ("role", ctypes.c_int)]


class RegionMetrics(ctypes.Structure):  # struct pim_region_metrics
    _fields_ = [("region_id", ctypes.c_uint32), ("evidence", ctypes.c_int), ("t_host", ctypes.c_double),
                ("t_host_spread", ctypes.c_double), ("have_n_rd", ctypes.c_int), ("n_rd", ctypes.c_double),
                ("have_store", ctypes.c_int), ("c_store", ctypes.c_double), ("c_be1", ctypes.c_double),
                ("c_be2", ctypes.c_double), ("c_be3", ctypes.c_double), ("bw_read_estimate", ctypes.c_double),
                ("source", ctypes.c_char_p), ("updated_at", ctypes.c_int64), ("source_b_cpu", ctypes.c_double),
                ("origin_host", ctypes.c_char_p), ("origin_measured_at", ctypes.c_int64),
                ("origin_backend", ctypes.c_char_p)]


class Region(ctypes.Structure):  # struct pim_model_region
    _fields_ = [("id", ctypes.c_uint32), ("order", ctypes.c_uint32), ("name", ctypes.c_char_p),
                ("op", ctypes.c_char_p), ("location", ctypes.c_char_p), ("n_par", ctypes.c_uint64),
                ("n_total", ctypes.c_uint64), ("trip", ctypes.c_uint64),
                ("parallel_extents", ctypes.POINTER(ctypes.c_uint64)),
                ("reduction_extents", ctypes.POINTER(ctypes.c_uint64)),
                ("n_parallel_extents", ctypes.c_size_t), ("n_reduction_extents", ctypes.c_size_t),
                ("operands", ctypes.POINTER(Operand)), ("n_operands", ctypes.c_size_t),
                ("metrics", ctypes.POINTER(RegionMetrics))]


class ModelDetail(ctypes.Structure):  # struct pim_model_detail
    _fields_ = [("info", ModelInfo), ("allocations", ctypes.POINTER(Allocation)),
                ("n_allocations", ctypes.c_size_t), ("regions", ctypes.POINTER(Region)),
                ("n_regions", ctypes.c_size_t), ("metrics", ctypes.POINTER(RegionMetrics)),
                ("n_metrics", ctypes.c_size_t), ("internal_", ctypes.c_void_p)]


KINDS = {1: "argument", 2: "alloc", 3: "global"}
ROLES = {1: "in", 2: "out", 3: "inout"}
EINVAL = 22
PIM_LOAD_REPLACE = 1

lib = ctypes.CDLL(sys.argv[1])
lib.pim_client_new.restype = ctypes.c_void_p
lib.pim_client_error.restype = ctypes.c_char_p
lib.pim_client_error.argtypes = [ctypes.c_void_p]
lib.pim_client_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
lib.pim_decisions_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                                  ctypes.POINTER(ctypes.POINTER(Decisions))]
lib.pim_decisions_free.argtypes = [ctypes.POINTER(Decisions)]
lib.pim_model_load_json.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint,
                                    ctypes.POINTER(ctypes.POINTER(ModelLoaded))]
lib.pim_model_loaded_free.argtypes = [ctypes.POINTER(ModelLoaded)]
lib.pim_model_show_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.POINTER(ModelDetail))]
lib.pim_model_detail_free.argtypes = [ctypes.POINTER(ModelDetail)]
lib.pim_model_remove.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lib.pim_client_free.argtypes = [ctypes.c_void_p]


def fail(what):
    sys.exit("typed.py: %s: %s" % (what, lib.pim_client_error(c).decode()))


c = lib.pim_client_new()
d = ctypes.POINTER(Decisions)()
if (lib.pim_client_connect(c, sys.argv[2].encode(), b"typed.py") < 0 or
        lib.pim_decisions_get(c, sys.argv[3].encode(), None, ctypes.byref(d)) < 0):
    fail(sys.argv[3])
t = d.contents
# per region id: 0 host, 1 PIM, 2 no such region
place = "".join(str(t.place[i]) for i in range(t.id_limit))
print("%s: id_limit %d, offloaded %d, place %s" % (t.model.decode(), t.id_limit, t.offloaded, place))
lib.pim_decisions_free(d)

if len(sys.argv) > 4:
    text = open(sys.argv[4], "rb").read()
    want = json.loads(text)
    loaded = ctypes.POINTER(ModelLoaded)()
    if lib.pim_model_load_json(c, text, len(text), PIM_LOAD_REPLACE, ctypes.byref(loaded)) < 0:
        fail("load")
    name = loaded.contents.info.name
    lib.pim_model_loaded_free(loaded)
    detail = ctypes.POINTER(ModelDetail)()
    if lib.pim_model_show_get(c, name, ctypes.byref(detail)) < 0:
        fail("show")
    m = detail.contents
    # the shown manifest is the file's: allocations by id, regions in program order
    allocs = [(a.id, a.bytes, KINDS.get(a.kind), a.name.decode())
              for a in (m.allocations[i] for i in range(m.n_allocations))]
    want_allocs = sorted((a["id"], a["bytes"], a["kind"], a.get("name", "")) for a in want["allocations"])
    regions = []
    for r in (m.regions[i] for i in range(m.n_regions)):
        ops = [(o.allocation_id, o.bytes, ROLES.get(o.role), o.elem_type.decode(), o.elem_bits)
               for o in (r.operands[j] for j in range(r.n_operands))]
        regions.append((r.id, r.name.decode(), r.op.decode(), r.order, r.n_par, r.n_total, r.trip,
                        [r.parallel_extents[j] for j in range(r.n_parallel_extents)],
                        [r.reduction_extents[j] for j in range(r.n_reduction_extents)], ops, bool(r.metrics)))
    want_regions = sorted(((g["id"], g["name"], g["op"], g["order"], g["n_par"], g["n_total"], g.get("trip", 1),
                            g.get("parallel_extents", []), g.get("reduction_extents", []),
                            [(o["allocation"], o["bytes"], o["role"], o.get("elem_type", ""), o.get("elem_bits", 0))
                             for o in g["operands"]], False) for g in want["regions"]), key=lambda g: g[3])
    if (m.info.name.decode() != want["name"] or m.info.source.decode() != want.get("source", "") or
            allocs != want_allocs or regions != want_regions or m.n_metrics != 0):
        sys.exit("typed.py: the shown model differs from %s" % sys.argv[4])
    print("%s: %d regions, %d allocations, as in the file; first region %s %s n_total %d" %
          (m.info.name.decode(), m.n_regions, m.n_allocations, regions[0][1], regions[0][2], regions[0][5]))
    lib.pim_model_detail_free(detail)
    # a malformed manifest: refused here with the parser's message, and nothing is loaded
    r = lib.pim_model_load_json(c, text[:len(text) // 2], len(text) // 2, PIM_LOAD_REPLACE, ctypes.byref(loaded))
    if r != -EINVAL or loaded:
        sys.exit("typed.py: a malformed manifest gave %d" % r)
    print("malformed: %d %s" % (r, lib.pim_client_error(c).decode()))
    if lib.pim_model_remove(c, name) < 0:
        fail("remove")
lib.pim_client_free(c)
