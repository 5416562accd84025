# fuzz/harnesses.sh - the list of libFuzzer harnesses and what each needs;
# sourced (not run) by fuzz/run.sh, smoke.sh, long-run.sh and merge.sh.
#
# A new harness fuzz/fuzz_NAME.c: add NAME to FUZZ_HARNESSES, give it a
# section in Makefile.am's fuzzing part, a seed corpus fuzz/corpus/NAME/
# (minimised: fuzz/merge.sh NAME), a tests/data/NAME/crashers/ directory
# that `make check` replays, and a row in fuzz/README.md. fuzz_seed below
# only matters when seeds come from elsewhere in the repository.
#
# Every script runs the binaries with these set (fuzz_env):
#   top_srcdir      the repository (kv_state's models in tests/data/engine)
#   PARLEY_SHARED   ../shared (tok: ../shared/testdata/vocab)
#   HOME            whose ~/.cache/parley/models holds SmolLM2 (tok, prompt;
#                   PARLEY_TEST_MODEL overrides it for prompt)

FUZZ_HARNESSES="gguf model json template store_import prompt tok tok_load kv_state tui_input md sse store_reports sampling hfpull"

# Export the environment the harnesses read; $1 is the repository's top.
fuzz_env() {
	top_srcdir=$1
	PARLEY_SHARED=${PARLEY_SHARED:-$1/../shared}
	export top_srcdir PARLEY_SHARED
}

# fuzz_seed NAME TOP DIR: copy or generate NAME's seeds from the
# repository's own data into DIR (beyond the committed fuzz/corpus/NAME).
# The generated ones (gguf, tok, kv_state) come from the seed writers
# fuzz_build makes in $FUZZ_BUILD (default TOP/build-fuzz).
fuzz_seed() {
	case $1 in
	gguf)
		"${FUZZ_BUILD:-$2/build-fuzz}/fuzz/seed_gguf" "$3"
		for f in "$PARLEY_SHARED"/testdata/vocab/*.gguf; do
			[ -f "$f" ] && [ "$(stat -c %s "$f")" -lt 4000000 ] &&
				cp "$f" "$3/" || true
		done
		;;
	model) cp "$2"/tests/data/engine/*.gguf "$3/" ;;
	store_import) cp "$2"/tests/data/store/seeds/*.json "$3/" ;;
	template)
		# the two directories share names (chatml.jinja, ...): prefix them
		for f in "$2"/tests/data/template/templates/*.jinja; do
			cp "$f" "$3/t-${f##*/}"
		done
		for f in "$2"/prompts/templates/*.jinja; do
			cp "$f" "$3/p-${f##*/}"
		done
		# the real models' templates llama.cpp carries (Qwen3.5,
		# Gemma 4, gpt-oss...)
		for f in "$2"/tests/data/template/llamacpp/templates/*.jinja; do
			cp "$f" "$3/l-${f##*/}"
		done
		;;
	json)
		cp "$2"/tests/data/template/cases/*.json \
			"$2"/tests/data/template/manifest.json "$3/"
		;;
	tok)
		"${FUZZ_BUILD:-$2/build-fuzz}/fuzz/seed_tok" \
			"$2/tests/data/tok/corpus.txt" "$3"
		;;
	tok_load) cp "$2"/tests/data/tok/tiny-*.gguf "$3/" ;;
	kv_state) "${FUZZ_BUILD:-$2/build-fuzz}/fuzz/seed_kv_state" "$2" "$3" ;;
	sse) cp "$2"/tests/data/sse/crashers/* "$3/" && rm -f "$3/README" ;;
	*) ;; # the committed corpus is all there is
	esac
}

# fuzz_opts NAME TOP: options of NAME's runs beyond the common ones.
fuzz_opts() {
	if [ -f "$2/fuzz/dict/$1.dict" ]; then
		echo "-dict=$2/fuzz/dict/$1.dict"
	fi
	# tui_input: libedit's el_init (termcap's tgetent) keeps a few bytes
	# of ncurses' at every input (not parley's: fuzz_tui_input.c tells
	# LeakSanitizer to ignore them), so libFuzzer would run a full leak
	# scan after every input, 15 times slower; leaks are still checked
	# when the process ends
	if [ "$1" = tui_input ]; then
		echo "-detect_leaks=0"
	fi
}

# fuzz_build TOP BUILD NAME...: configure BUILD (clang, --enable-fuzzing,
# no CUDA) if it is not yet, then make the harnesses NAME... only.
fuzz_build() {
	_top=$1 _bld=$2
	shift 2
	if [ ! -x "$_top/configure" ]; then
		(cd "$_top" && autoreconf -fi >/dev/null 2>&1)
	fi
	mkdir -p "$_bld"
	if [ ! -f "$_bld/Makefile" ]; then
		(cd "$_bld" && "$_top/configure" CC=clang --enable-fuzzing \
			--without-cuda >configure.out) || {
			cat "$_bld/configure.out" >&2
			return 1
		}
	fi
	_t=
	for _n in "$@"; do
		_t="$_t fuzz/fuzz_$_n"
		case $_n in # the seed writers fuzz_seed runs
		gguf | tok | kv_state) _t="$_t fuzz/seed_$_n" ;;
		esac
	done
	# shellcheck disable=SC2086
	(cd "$_bld" && make -j"$(nproc)" $_t >make.out 2>&1) || {
		tail -n 40 "$_bld/make.out" >&2
		return 1
	}
}
