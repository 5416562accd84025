# tests/lib.sh - TAP helpers and common paths for parley's shell tests.
# Sourced by tests/t_*.sh; automake runs those with top_srcdir and
# top_builddir in the environment.

: "${top_builddir:=.}"
: "${top_srcdir:=.}"
PARLEY=${PARLEY:-$top_builddir/parley}
# The chat and CLI tests compare with the CPU reference's output; on a GPU
# machine "auto" would pick the CUDA engine. Tests of the CUDA engine ask
# for it by --backend.
PARLEY_BACKEND=${PARLEY_BACKEND:-cpu}
export PARLEY_BACKEND
tap_n=0
tap_failed=0

# ok COND_STATUS DESCRIPTION: record one check from an exit status.
ok() {
	tap_n=$((tap_n + 1))
	if [ "$1" -eq 0 ]; then
		echo "ok $tap_n - $2"
	else
		echo "not ok $tap_n - $2"
		tap_failed=$((tap_failed + 1))
	fi
}

# check DESCRIPTION COMMAND...: run COMMAND, record its status.
check() {
	d=$1
	shift
	if "$@" >/dev/null 2>&1; then ok 0 "$d"; else ok 1 "$d"; fi
}

diag() { echo "# $*"; }

done_testing() {
	echo "1..$tap_n"
	[ "$tap_failed" -eq 0 ]
}

skip_all() {
	echo "1..0 # SKIP $*"
	exit 0
}

# The default model, as the setup script and tests fetch it.
test_model() {
	if [ -n "${PARLEY_TEST_MODEL:-}" ]; then
		echo "$PARLEY_TEST_MODEL"
	else
		echo "${XDG_CACHE_HOME:-$HOME/.cache}/parley/models/SmolLM2-135M-Instruct.Q4_1.gguf"
	fi
}
