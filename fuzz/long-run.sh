#!/bin/sh
# fuzz/long-run.sh - the long runs on record (fuzz/README.md's Runs table):
# every harness at once, 2 workers each, for SECONDS.
#
#   fuzz/long-run.sh OUTDIR SECONDS [NAME[=JOBS]]...
#
# With NAMEs only those harnesses run, each with JOBS workers (default 2).
# A run is resumable: a harness whose OUTDIR/corpus-NAME exists goes on from
# that corpus (a machine that may run 10 minutes at a time reaches an hour
# in segments), and OUTDIR/NAME.segments keeps one line per segment
# ("executions seconds jobs"); the summary adds them up: executions, wall
# seconds and worker-seconds (seconds x jobs) over all segments.
#
# Runs from a checkout of the repository on binaries already built here
# with `fuzz/run.sh all 1` or `fuzz/smoke.sh` (build-fuzz/fuzz/fuzz_*;
# $FUZZ_BIN overrides the directory): clang is not needed. Each harness
# NAME gets -fork=2 (two worker processes, restarted after a finding so
# the run goes on: -ignore_crashes/-ignore_timeouts/-ignore_ooms) on
# OUTDIR/corpus-NAME (the committed fuzz/corpus/NAME and the seeds of
# fuzz/harnesses.sh's fuzz_seed, by the seed writers built beside), with its
# findings in OUTDIR/artifacts-NAME/ and its log in OUTDIR/NAME.log. All
# harnesses at once take 2 x (number of harnesses) cores: 22 for 11
# (the target: 16 cores, 128 GB; each worker stays under 2 GB).
# At the end OUTDIR/summary.txt gets one line per harness (executions,
# executions per second, coverage as cov/ft, corpus size, findings) and
# OUTDIR/summary.md the rows for fuzz/README.md's table.
#
# What the machine needs (ldd of the binaries built on Debian 12, glibc
# 2.36, clang 14; libFuzzer and the sanitizer runtimes are linked in):
#   libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 (glibc >= 2.36)
#   libncursesw.so.6 libtinfo.so.6 libedit.so.2 libbsd.so.0 libmd.so.0
#   libsqlite3.so.0 libpcre2-8.so.0 libutf8proc.so.2 libmd4c.so.0 (md)
# and data: the C.UTF-8 locale and terminfo's xterm-256color (tui_input,
# md), tests/data/engine (kv_state) of this checkout, ../shared/testdata/
# vocab ($PARLEY_SHARED; tok) and SmolLM2-135M-Instruct.Q4_1.gguf in
# ~/.cache/parley/models (tok, prompt; $PARLEY_TEST_MODEL for prompt):
# the script checks these first and stops when one is missing.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/fuzz/harnesses.sh"
usage='usage: fuzz/long-run.sh OUTDIR SECONDS [NAME[=JOBS]]...'
out=${1:?$usage}
secs=${2:?$usage}
shift 2
# jobs_of NAME: the workers NAME gets in this run
sel=
if [ $# -gt 0 ]; then
	for a in "$@"; do
		n=${a%%=*}
		case " $FUZZ_HARNESSES " in
		*" $n "*) ;;
		*)
			echo "fuzz/long-run.sh: no harness '$n' (fuzz/harnesses.sh)" >&2
			exit 2
			;;
		esac
		sel="$sel $a"
	done
	FUZZ_HARNESSES=$(for a in $sel; do echo "${a%%=*}"; done | tr '\n' ' ')
fi
jobs_of() {
	for a in $sel; do
		if [ "${a%%=*}" = "$1" ] && [ "$a" != "$1" ]; then
			echo "${a#*=}"
			return
		fi
	done
	echo 2
}
bin=${FUZZ_BIN:-$top/build-fuzz/fuzz}
mkdir -p "$out"
out=$(cd "$out" && pwd)
fuzz_env "$top"
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export UBSAN_OPTIONS
model=${PARLEY_TEST_MODEL:-$HOME/.cache/parley/models/SmolLM2-135M-Instruct.Q4_1.gguf}

# Stop early on what would make a run fuzz nothing.
missing=
for n in $FUZZ_HARNESSES; do
	[ -x "$bin/fuzz_$n" ] || missing="$missing $bin/fuzz_$n"
	case $n in
	gguf | tok | kv_state)
		[ -x "$bin/seed_$n" ] || missing="$missing $bin/seed_$n"
		;;
	esac
	[ -d "$top/fuzz/corpus/$n" ] || missing="$missing fuzz/corpus/$n"
done
[ -f "$model" ] || missing="$missing $model"
[ -f "$PARLEY_SHARED/testdata/vocab/ggml-vocab-gpt-2.gguf" ] ||
	missing="$missing $PARLEY_SHARED/testdata/vocab"
if [ -n "$missing" ]; then
	echo "fuzz/long-run.sh: missing:$missing" >&2
	exit 1
fi
for n in $FUZZ_HARNESSES; do
	if ldd "$bin/fuzz_$n" | grep 'not found' >&2; then
		echo "fuzz/long-run.sh: fuzz_$n lacks the libraries above" >&2
		exit 1
	fi
done

echo "fuzz/long-run.sh: $(echo "$FUZZ_HARNESSES" | wc -w) harnesses," \
	"$secs s, in $out" >&2
for n in $FUZZ_HARNESSES; do
	j=$(jobs_of "$n")
	if [ ! -d "$out/corpus-$n" ]; then
		rm -f "$out/$n.segments"
		mkdir -p "$out/corpus-$n"
		cp "$top/fuzz/corpus/$n"/* "$out/corpus-$n/"
		FUZZ_BUILD=${bin%/fuzz} fuzz_seed "$n" "$top" "$out/corpus-$n"
	fi
	mkdir -p "$out/artifacts-$n"
	(
		cd "$out"
		rc=0
		# shellcheck disable=SC2046
		nice "$bin/fuzz_$n" $(fuzz_opts "$n" "$top") -fork="$j" \
			-ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
			-max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 \
			-artifact_prefix="$out/artifacts-$n/" -print_final_stats=1 \
			"$out/corpus-$n" >"$out/$n.log" 2>&1 || rc=$?
		echo "$rc" >"$out/$n.rc"
		last=$(grep -E '^#[0-9]+: cov: ' "$out/$n.log" | tail -n 1)
		r=$(echo "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
		t=$(echo "$last" | sed -n 's/.* time: \([0-9]*\)s.*/\1/p')
		echo "${r:-0} ${t:-0} $j" >>"$out/$n.segments"
	) &
done
wait

# The fork driver's last status line: "#RUNS: cov: C ft: F corp: N exec/s
# E oom/timeout/crash: O/T/C time: Ss job: J ...".
day=$(date -u +%Y-%m-%d)
host=$(hostname)
cores=$(nproc)
: >"$out/summary.txt"
echo "| date | harness | machine | time | executions | coverage (edges / features) | corpus | findings |" >"$out/summary.md"
echo "|---|---|---|---|---|---|---|---|" >>"$out/summary.md"
for n in $FUZZ_HARNESSES; do
	last=$(grep -E '^#[0-9]+: cov: ' "$out/$n.log" | tail -n 1)
	cov=$(echo "$last" | sed -n 's/.* cov: \([0-9]*\).*/\1/p')
	ft=$(echo "$last" | sed -n 's/.* ft: \([0-9]*\).*/\1/p')
	# totals over every segment of this OUTDIR
	set -- $(awk '{r += $1; t += $2; w += $2 * $3; s++}
		END {print r + 0, t + 0, w + 0, s + 0}' "$out/$n.segments")
	runs=$1 t=$2 wsec=$3 segs=$4
	eps=0
	[ "$t" -gt 0 ] && eps=$((runs / t))
	files=$(ls "$out/corpus-$n" | wc -l)
	kb=$(du -sk "$out/corpus-$n" | cut -f1)
	finds=$(ls "$out/artifacts-$n" | wc -l)
	names=$(ls "$out/artifacts-$n" | tr '\n' ' ')
	printf '%s: executions %s, %s/s, cov %s ft %s, corpus %s files %s KB, findings %s %s(exit %s, %s s wall, %s worker-s, %s segments)\n' \
		"$n" "$runs" "$eps" "${cov:-?}" "${ft:-?}" "$files" "$kb" "$finds" \
		"$names" "$(cat "$out/$n.rc")" "$t" "$wsec" "$segs" >>"$out/summary.txt"
	printf '| %s | fuzz_%s | %s, %s cores, %s segment(s), fork=%s | %s s wall, %s worker-min | %s (%s/s) | %s / %s | %s inputs, %s KB | %s |\n' \
		"$day" "$n" "$host" "$cores" "$segs" "$(jobs_of "$n")" "$t" "$((wsec / 60))" \
		"$runs" "$eps" "${cov:-?}" "${ft:-?}" \
		"$files" "$kb" "$([ "$finds" -eq 0 ] && echo none || echo "$finds: $names")" \
		>>"$out/summary.md"
done
cat "$out/summary.txt"
