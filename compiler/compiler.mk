# compiler/compiler.mk: pim-extract, the example models and their tests.
# Included by the top Makefile ("-include compiler/compiler.mk", after B is set); uses its B, CC,
# ALL_CFLAGS, INC_compiler, INC_TESTS, DEPFLAGS, LIBS_COMMON, LIBS_DAEMON, LIBS_CHECK and the
# libraries $(B)/libpimcommon.a (what pim-extract links) and $(CORE_LIBS) (the tests).  Only these targets need MLIR 19; the rest of
# the build works without it.
#
#   $(B)/pim-extract      the extractor (MLIR C API, static libMLIRCAPI*.a + libMLIR/libLLVM-19)
#   compiler              the same
#   compiler-examples     examples/NAME.mlir -> $(B)/examples/NAME.manifest.json + NAME.so
#   check-compiler        tests/compiler (prints "compiler: N passed, M failed")
#   check-onnx            ONNX's backend tests through pim-extract and the model library
#                         (prints "onnx tests: N passed, R refused, W wrong")
#   check-torch           examples/torch exported, extracted, run against PyTorch, profiled and
#                         placed under a private pimd (prints "torch e2e: N passed, M failed")
#   bench-extract         GPT-2 small at real size exported, through pim-extract --weights zero
#                         (wall time and peak memory against their goals), profiled and placed
#
# Variables for the top Makefile: MLIR_DEB_PKGS (add to make deps), MLIR_AVAILABLE (1 or
# empty), PIM_EXTRACT, COMPILER_ALL (what "all" can depend on: pim-extract and the examples
# when MLIR is installed, nothing otherwise), COMPILER_EXAMPLES (every output of
# compiler-examples), DEMO_MANIFEST and DEMO_LIBRARY (the decoder block's, for make demo).

# Keep whatever goal the includer has (an include placed before "all:" must not become the
# default goal; an empty value lets the next target defined be the default, as without us).
COMPILER_SAVED_GOAL := $(.DEFAULT_GOAL)

# llvm-19-dev: the llvm-c headers and libLLVM-19.so link name (clang-19 only recommends it).
MLIR_DEB_PKGS := libmlir-19-dev mlir-19-tools clang-19 llvm-19-dev
# The ONNX importer's onnx.proto (libonnx-dev), ONNX's backend tests (libonnx-testdata), and
# the PyTorch path's exporter and test-data writer (python3-torch 1.13, python3-onnx), and the
# BLAS python3-torch recommends (PyTorch's side of make bench-hostcode; Debian's reference BLAS
# is no baseline for a GEMV).
ONNX_DEB_PKGS := libonnx-dev libonnx-testdata python3-torch python3-onnx libopenblas0-pthread
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
ONNX_TESTDATA ?= /usr/share/libonnx-testdata/data
# check-onnx runs the library of every test it imports; make check one in ONNX_CHECK_EVERY.
ONNX_TESTS_EVERY ?= 1
ONNX_CHECK_EVERY ?= 3
LLVM_DIR ?= /usr/lib/llvm-19
# What the build reads, one file per package: MLIR is "available" only when all are there.
MLIR_NEEDS := $(LLVM_DIR)/lib/libMLIRCAPIIR.a $(LLVM_DIR)/lib/libMLIR.so \
	$(LLVM_DIR)/include/llvm-c/Support.h $(LLVM_DIR)/lib/libLLVM-19.so $(LLVM_DIR)/bin/clang
MLIR_LACKS := $(filter-out $(wildcard $(MLIR_NEEDS)),$(MLIR_NEEDS))
MLIR_AVAILABLE := $(if $(MLIR_LACKS),,1)
MLIR_CFLAGS := -isystem $(LLVM_DIR)/include
# doc/mlir.md: the working link line (no pkg-config file, no libMLIR-C.so in Debian 12).
MLIR_LIBS := -Wl,--start-group $(LLVM_DIR)/lib/libMLIRCAPIIR.a \
	$(LLVM_DIR)/lib/libMLIRCAPIRegisterEverything.a $(LLVM_DIR)/lib/libMLIRCAPITarget.a \
	-Wl,--end-group -L$(LLVM_DIR)/lib -lMLIR -lLLVM-19 -lstdc++ -lm -Wl,-rpath,$(LLVM_DIR)/lib

PIM_EXTRACT := $(B)/pim-extract
# The ONNX importer (onnx.c and the files split from it; onnx-run links it without MLIR).
ONNX_SRC := compiler/onnx.c compiler/onnx_value.c compiler/onnx_emit.c compiler/onnx_elementwise.c \
	compiler/onnx_contract.c compiler/onnx_reduce.c compiler/onnx_movement.c
ONNX_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(ONNX_SRC))
COMPILER_SRC := compiler/pim-extract.c compiler/extract.c compiler/extract_regions.c \
	compiler/extract_operands.c compiler/extract_manifest.c compiler/hostcode.c compiler/model.c compiler/mlirx.c $(ONNX_SRC)
COMPILER_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(COMPILER_SRC)) $(B)/obj/gen/onnx.pb-c.o
EXAMPLE_MLIR := $(sort $(wildcard examples/*.mlir))
EXAMPLE_NAMES := $(patsubst examples/%.mlir,%,$(EXAMPLE_MLIR))
COMPILER_EXAMPLES := $(foreach n,$(EXAMPLE_NAMES),$(B)/examples/$(n).manifest.json $(B)/examples/$(n).so)
DEMO_MANIFEST := $(B)/examples/decoder-block.manifest.json
DEMO_LIBRARY := $(B)/examples/decoder-block.so
COMPILER_ALL := $(if $(MLIR_AVAILABLE),$(PIM_EXTRACT) $(COMPILER_EXAMPLES),)
COMPILER_TEST := $(B)/tests/compiler/test_extract

define MLIR_MISSING
	@echo "MLIR 19 is not fully installed (missing: $(MLIR_LACKS)):" >&2
	@echo "  run 'make deps' as root (it installs $(MLIR_DEB_PKGS))," >&2
	@echo "  or: sudo apt-get install -y $(MLIR_DEB_PKGS)" >&2
	@exit 1
endef

# protobuf-c code for ONNX, generated from the onnx.proto Debian installs (no copy kept here).
$(B)/onnx/onnx.pb-c.c $(B)/onnx/onnx.pb-c.h: $(ONNX_PROTO)
	@mkdir -p $(B)/onnx
	@[ -r $(ONNX_PROTO) ] || { echo "$(ONNX_PROTO) is missing: run 'make deps' (libonnx-dev)" >&2; exit 1; }
	protoc-c --proto_path=$(dir $(ONNX_PROTO)) --c_out=$(B)/onnx $(ONNX_PROTO)

$(B)/obj/gen/onnx.pb-c.o: $(B)/onnx/onnx.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -I$(B)/onnx $(DEPFLAGS) -c -o $@ $<

$(ONNX_OBJ): $(B)/onnx/onnx.pb-c.h

# More specific than the top Makefile's $(B)/obj/%.o: the MLIR headers come in here only.
$(B)/obj/compiler/%.o: compiler/%.c $(B)/proto/pim.pb-c.h
	@mkdir -p $(dir $@)
ifeq ($(MLIR_AVAILABLE),1)
	$(CC) $(ALL_CFLAGS) $(INC_compiler) $(MLIR_CFLAGS) -I$(B)/onnx $(DEPFLAGS) -c -o $@ $<
else
	$(MLIR_MISSING)
endif

$(PIM_EXTRACT): $(COMPILER_OBJ) $(B)/libpimcommon.a
ifeq ($(MLIR_AVAILABLE),1)
	$(CC) $(ALL_CFLAGS) -o $@ $(COMPILER_OBJ) $(B)/libpimcommon.a $(LIBS_COMMON) $(MLIR_LIBS)
else
	$(MLIR_MISSING)
endif

compiler: $(PIM_EXTRACT)

# One run makes both the manifest and the model library of an example.
$(B)/examples/%.manifest.json $(B)/examples/%.so &: examples/%.mlir $(PIM_EXTRACT)
	@mkdir -p $(B)/examples
	$(PIM_EXTRACT) -o $(B)/examples/$*.manifest.json --emit-model $(B)/examples/$*.so $<

compiler-examples: $(COMPILER_EXAMPLES)

$(COMPILER_TEST): tests/compiler/test_extract.c $(CORE_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_TESTS) -Itests/unit $(DEPFLAGS) -rdynamic -o $@ $< $(CORE_LIBS) \
		$(LIBS_DAEMON) $(LIBS_CHECK) -ldl

ONNX_RUN := $(B)/tests/compiler/onnx-run
# onnx-run: runs a model library on ONNX test data; links the importer alone (no MLIR).
$(ONNX_RUN): tests/compiler/onnx_run.c $(ONNX_OBJ) $(B)/obj/gen/onnx.pb-c.o $(B)/libpimcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(INC_compiler) -Iclient -I$(B)/onnx $(DEPFLAGS) -rdynamic -o $@ $< \
		$(ONNX_OBJ) $(B)/obj/gen/onnx.pb-c.o $(B)/libpimcommon.a $(LIBS_COMMON) -ldl

# pimd and pimctl: run.sh loads every manifest and profiles every library through them.
ifeq ($(MLIR_AVAILABLE),1)
check-compiler: $(PIM_EXTRACT) $(COMPILER_EXAMPLES) $(COMPILER_TEST) $(B)/pimd $(B)/pimctl
	sh tests/compiler/run.sh $(B)
else
check-compiler:
	$(MLIR_MISSING)
endif

# ONNX's backend tests (libonnx-testdata) through pim-extract and onnx-run.
ifeq ($(MLIR_AVAILABLE),1)
check-onnx: $(PIM_EXTRACT) $(ONNX_RUN)
	ONNX_TESTS_EVERY=$(ONNX_TESTS_EVERY) sh tests/compiler/onnx-tests.sh $(B) $(ONNX_TESTDATA)
else
check-onnx:
	$(MLIR_MISSING)
endif

ifeq ($(MLIR_AVAILABLE),1)
check-torch: $(PIM_EXTRACT) $(ONNX_RUN) $(B)/pimd $(B)/pimd-worker $(B)/pimctl
	sh tests/compiler/torch-e2e.sh $(B)
else
check-torch:
	$(MLIR_MISSING)
endif

ifeq ($(MLIR_AVAILABLE),1)
bench-extract: $(PIM_EXTRACT) $(B)/pimd $(B)/pimd-worker $(B)/pimctl
	sh bench/bench_extract.sh $(B)
else
bench-extract:
	$(MLIR_MISSING)
endif

.PHONY: compiler compiler-examples check-compiler check-onnx check-torch bench-extract

.DEFAULT_GOAL := $(COMPILER_SAVED_GOAL)
