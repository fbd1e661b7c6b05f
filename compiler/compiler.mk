# compiler/compiler.mk: pim-extract, the example models and their tests.
# Included by the top Makefile ("-include compiler/compiler.mk", after B is set); uses its B, CC, ALL_CFLAGS,
# LIBS_DAEMON, LIBS_CHECK and $(B)/libpimcore.a.  Only these targets need MLIR 19; the rest of
# the build works without it.
#
#   $(B)/pim-extract      the extractor (MLIR C API, static libMLIRCAPI*.a + libMLIR/libLLVM-19)
#   compiler              the same
#   compiler-examples     examples/NAME.mlir -> $(B)/examples/NAME.manifest.json + NAME.so
#   check-compiler        tests/compiler (prints "compiler: N passed, M failed")
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
LLVM_DIR ?= /usr/lib/llvm-19
# What the build reads, one file per package: MLIR is "available" only when all are there.
MLIR_NEEDS := $(LLVM_DIR)/lib/libMLIRCAPIIR.a $(LLVM_DIR)/lib/libMLIR.so \
	$(LLVM_DIR)/include/llvm-c/Support.h $(LLVM_DIR)/lib/libLLVM-19.so $(LLVM_DIR)/bin/clang
MLIR_LACKS := $(filter-out $(wildcard $(MLIR_NEEDS)),$(MLIR_NEEDS))
MLIR_AVAILABLE := $(if $(MLIR_LACKS),,1)
MLIR_CFLAGS := -isystem $(LLVM_DIR)/include
# notes/mlir.md: the working link line (no pkg-config file, no libMLIR-C.so in Debian 12).
MLIR_LIBS := -Wl,--start-group $(LLVM_DIR)/lib/libMLIRCAPIIR.a \
	$(LLVM_DIR)/lib/libMLIRCAPIRegisterEverything.a $(LLVM_DIR)/lib/libMLIRCAPITarget.a \
	-Wl,--end-group -L$(LLVM_DIR)/lib -lMLIR -lLLVM-19 -lstdc++ -lm -Wl,-rpath,$(LLVM_DIR)/lib

PIM_EXTRACT := $(B)/pim-extract
COMPILER_SRC := compiler/pim-extract.c compiler/extract.c compiler/model.c compiler/mlirx.c
COMPILER_OBJ := $(patsubst %.c,$(B)/obj/%.o,$(COMPILER_SRC))
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

# More specific than the top Makefile's $(B)/obj/%.o: the MLIR headers come in here only.
$(B)/obj/compiler/%.o: compiler/%.c $(B)/proto/pim.pb-c.h
	@mkdir -p $(dir $@)
ifeq ($(MLIR_AVAILABLE),1)
	$(CC) $(ALL_CFLAGS) $(MLIR_CFLAGS) -MMD -MP -c -o $@ $<
else
	$(MLIR_MISSING)
endif

$(PIM_EXTRACT): $(COMPILER_OBJ) $(B)/libpimcore.a
ifeq ($(MLIR_AVAILABLE),1)
	$(CC) $(ALL_CFLAGS) -o $@ $(COMPILER_OBJ) $(B)/libpimcore.a $(LIBS_DAEMON) $(MLIR_LIBS)
else
	$(MLIR_MISSING)
endif

compiler: $(PIM_EXTRACT)

# One run makes both the manifest and the model library of an example.
$(B)/examples/%.manifest.json $(B)/examples/%.so &: examples/%.mlir $(PIM_EXTRACT)
	@mkdir -p $(B)/examples
	$(PIM_EXTRACT) -o $(B)/examples/$*.manifest.json --emit-model $(B)/examples/$*.so $<

compiler-examples: $(COMPILER_EXAMPLES)

$(COMPILER_TEST): tests/compiler/test_extract.c $(B)/libpimcore.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Itests/unit -rdynamic -o $@ $< $(B)/libpimcore.a $(LIBS_DAEMON) \
		$(LIBS_CHECK) -ldl

# pimd and pimctl: run.sh loads every manifest and profiles every library through them.
ifeq ($(MLIR_AVAILABLE),1)
check-compiler: $(PIM_EXTRACT) $(COMPILER_EXAMPLES) $(COMPILER_TEST) $(B)/pimd $(B)/pimctl
	sh tests/compiler/run.sh $(B)
else
check-compiler:
	$(MLIR_MISSING)
endif

.PHONY: compiler compiler-examples check-compiler

.DEFAULT_GOAL := $(COMPILER_SAVED_GOAL)
