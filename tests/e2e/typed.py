#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# libpimclient from Python through ctypes: a model's decision table with pim_decisions_get(),
# no protobuf.  Usage: typed.py LIBPIMCLIENT_SO SOCKET MODEL
import ctypes
import sys


class Decisions(ctypes.Structure):  # struct pim_decisions (pim.h)
    _fields_ = [("model", ctypes.c_char_p), ("id_limit", ctypes.c_uint32),
                ("offloaded", ctypes.c_uint32), ("evidence", ctypes.c_int),
                ("place", ctypes.POINTER(ctypes.c_uint8))]


lib = ctypes.CDLL(sys.argv[1])
lib.pim_client_new.restype = ctypes.c_void_p
lib.pim_client_error.restype = ctypes.c_char_p
lib.pim_client_error.argtypes = [ctypes.c_void_p]
lib.pim_client_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p]
lib.pim_decisions_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p,
                                  ctypes.POINTER(ctypes.POINTER(Decisions))]
lib.pim_decisions_free.argtypes = [ctypes.POINTER(Decisions)]
lib.pim_client_free.argtypes = [ctypes.c_void_p]

c = lib.pim_client_new()
d = ctypes.POINTER(Decisions)()
if (lib.pim_client_connect(c, sys.argv[2].encode(), b"typed.py") < 0 or
        lib.pim_decisions_get(c, sys.argv[3].encode(), None, ctypes.byref(d)) < 0):
    sys.exit("typed.py: " + lib.pim_client_error(c).decode())
t = d.contents
# per region id: 0 host, 1 PIM, 2 no such region
place = "".join(str(t.place[i]) for i in range(t.id_limit))
print("%s: id_limit %d, offloaded %d, place %s" % (t.model.decode(), t.id_limit, t.offloaded, place))
lib.pim_decisions_free(d)
lib.pim_client_free(c)
