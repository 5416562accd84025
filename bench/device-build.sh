#!/bin/sh
# bench/device-build.sh - build parley and its test programs on the GPU
# machine (the device tool's), from a checkout copied there without its
# build: the development headers installed from a copy of
# ../shared/device (DEVDIR, default .g7/device: copy it into an ignored
# folder and carry it), the autotools' outputs made here carried too
# (configure, Makefile.in, aclocal.m4, build-aux: that machine has no
# automake of the right version) and touched so that make does not try to
# remake them, then configure (sm_90), make and `make check TESTS=` (the
# test programs, none run). Logs in $OUT (or /tmp). A second call on a
# warm machine finds the build and only remakes what changed.
#
#   sh bench/device-build.sh [BUILD_DIR]        (default build)
set -eu
b=${1:-build}
log=${OUT:-/tmp}
dev=${DEVDIR:-.g7/device}
if [ ! -f /tmp/.parley-headers ]; then
	sh "$dev/install-dev-headers.sh" >"$log/headers.log" 2>&1
	: >/tmp/.parley-headers
fi
touch aclocal.m4
sleep 1
touch Makefile.in configure build-aux/*
mkdir -p "$b"
cd "$b"
[ -f Makefile ] || ../configure --with-cuda-arch=90 >"$log/configure.log" 2>&1 ||
	{ tail -n 30 "$log/configure.log"; exit 1; }
make -j"$(nproc)" >"$log/make.log" 2>&1 || { grep -B2 -A8 error "$log/make.log" | head -n 60; exit 1; }
make -j"$(nproc)" check TESTS= >"$log/make-check.log" 2>&1 ||
	{ grep -A5 error "$log/make-check.log" | head -n 40; exit 1; }
echo "device-build: $(pwd)/parley and the test programs built"
