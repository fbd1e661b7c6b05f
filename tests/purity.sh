#!/bin/sh
# SPDX-License-Identifier: MIT
# purity.sh OBJ...: checks that the objects of the pure modules (PURE_MODULES in the Makefile)
# call nothing beyond computing libc/libm functions and each other, and keep no writable state.
# A pure module reads no file, socket, clock or environment: the shells do that and hand it
# plain structs.  Prints every offending symbol or section; exits 1 if there is one.
set -u

# libc/libm functions that compute and touch nothing outside the process's memory, and what the
# toolchain itself refers to.  Threads and the CPU's features are allowed: the MX quantizer
# splits a tensor over the CPUs it may run on and picks its SIMD path at run time.  So is
# allocating on huge pages (posix_memalign, then madvise(MADV_HUGEPAGE) on that memory only):
# the placement's working block of ~90 MB.
ALLOWED='
malloc calloc realloc free posix_memalign madvise
memcpy memmove memset memcmp memchr
strlen strnlen strcmp strncmp strcasecmp strncasecmp strchr strrchr strstr strdup strndup
strspn strcspn strtod strtof strtol strtoul strtoll strtoull strerror
snprintf vsnprintf qsort qsort_r bsearch
__ctype_b_loc __ctype_toupper_loc __ctype_tolower_loc __errno_location
ldexp ldexpf frexp frexpf fabs fabsf floor floorf ceil ceilf round roundf lround llround
trunc truncf sqrt sqrtf exp expf exp2 log logf log2 log2f log10 pow powf fmin fminf fmax fmaxf
fmod nextafter nextafterf
pthread_create pthread_join sched_getaffinity __sched_cpucount
__cpu_indicator_init __cpu_model _GLOBAL_OFFSET_TABLE_ __stack_chk_fail
__udivti3 __divti3 __umodti3 __modti3
'

[ $# -gt 0 ] || { echo "usage: purity.sh OBJ..." >&2; exit 2; }
for o in "$@"; do
	[ -r "$o" ] || { echo "purity: $o: not readable" >&2; exit 2; }
done

# What the pure modules define for each other.
defined=$(nm --defined-only -g "$@" | awk 'NF == 3 { print $3 }' | sort -u)

bad=0
for o in "$@"; do
	for s in $(nm -u "$o" | awk '{ print $2 }'); do
		case " $(echo $ALLOWED) " in *" $s "*) continue ;; esac
		case "$s" in __asan_* | __ubsan_* | __sanitizer_*) continue ;; esac
		echo "$defined" | grep -qx -- "$s" && continue
		echo "purity: $o calls $s, which is neither plain libc/libm nor a pure module"
		bad=1
	done
	# Writable data (.data, .bss, thread-local); .data.rel.ro is read-only after relocation.
	for sec in $(size -A "$o" | awk '$1 ~ /^\.(data|bss|tdata|tbss)/ && $1 !~ /^\.data\.rel\.ro/ && $2 > 0 { print $1 }'); do
		echo "purity: $o keeps state in $sec ($(nm "$o" | awk '$2 ~ /^[bBdD]$/ { printf "%s ", $3 }'))"
		bad=1
	done
done
[ $bad -eq 0 ] && echo "purity: $# pure modules call only libc/libm and each other, and keep no state"
exit $bad
