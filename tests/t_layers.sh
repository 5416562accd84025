#!/bin/sh
# t_layers.sh - directories are layers, and arrows point down only.
#
# The layers, top to bottom (see README.md, "Layout"):
#   5 front end  ui/ (every file): main(), the commands, the REPL, later
#                the ncurses screen. The only code that prints or exits.
#   4 session    src/ session, store*, config: the chat and its storage;
#                modelstore*, modelname: the models on disk (config's paths);
#                hfpull*: `parley pull`, into the hub cache modelstore reads.
#   3 text       src/ tok*, template*, prompt, promptdir, stopstr, harmony.
#   2 model      src/ gguf*, qtype, quant*, f16, model, engine*, backend_*,
#                sampler, trace, threadpool, verify (an engine beside an
#                engine); and cuda/ (every file): a
#                backend implements src/engine.h beside backend_cpu.c, so it
#                sits in the model layer and sees nothing above it.
#   1 base       src/ utf8, sbuf, json, sha256, secretfile: utilities with no
#                domain
#                knowledge.
#
# Rules, each reported as FILE:LINE: RULE: DETAIL:
#   unmapped          a source file under src/ whose module is not in the map
#                     below (a new module must be placed in a layer);
#   include-up        a quoted #include of a header in a higher layer;
#   unresolved        a quoted #include that names no file of src/, ui/,
#                     cuda/ (so its layer cannot be known);
#   private           NAME_int.h or NAME_impl.h included outside module NAME;
#   front-end-header  src/ or cuda/ including a terminal library
#                     (curses, libedit, readline) or <err.h>;
#   prints-or-exits   src/ or cuda/ code (comments and literals blanked)
#                     calling printf, vprintf, puts, putchar, perror, exit,
#                     _exit, _Exit, quick_exit or abort, write(1|2, ...), or
#                     naming stdin, stdout or stderr at all. Writing to a
#                     FILE * that the caller handed in (trace.c's trace file,
#                     gguf_write.c's output file) is library output and
#                     allowed; assert() is allowed for invariants.
#
# The checker runs first over a planted tree, where every rule must fire
# (and the look-alikes that are legal must not), then over the real tree.
. "${top_srcdir:-.}/tests/lib.sh"

# layer_of PATH: PATH relative to the top (src/tok_bpe.c). Sets layer to
# 1..5 and lname to its name; layer is empty when PATH is not mapped.
layer_of() {
	layer=
	lname=
	lo_mod=${1##*/}
	lo_mod=${lo_mod%.*}
	case $1 in
	ui/*)
		layer=5 lname=front-end
		return
		;;
	cuda/*)
		layer=2 lname=model
		return
		;;
	src/*) ;;
	*) return ;;
	esac
	case $lo_mod in
	session | session_* | store | store_* | config | config_* | \
		modelstore | modelstore_* | modelname | hfpull | hfpull_*)
		layer=4 lname=session
		;;
	tok | tok_* | template | template_* | prompt | promptdir | stopstr | \
		harmony)
		layer=3 lname=text
		;;
	gguf | gguf_* | qtype | quant | quant_* | f16 | model | model_* | \
		engine | engine_* | backend_* | sampler | trace | threadpool | \
		verify | remote | remote_*)
		layer=2 lname=model
		;;
	utf8 | sbuf | json | sse | sha256 | secretfile)
		layer=1 lname=base
		;;
	esac
}

# resolve FROM NAME: the file (relative to the top) that `#include "NAME"`
# in FROM names: FROM's own directory first, then the library's -I paths
# (src/, cuda/), then ui/. Prints nothing when no such file exists.
resolve() {
	rs_dir=${1%/*}
	rs_p=$rs_dir/$2
	while :; do # drop "dir/../" pairs: ui/../src/x.h -> src/x.h
		rs_q=$(echo "$rs_p" | sed 's,[^/.][^/]*/\.\./,,')
		[ "$rs_q" = "$rs_p" ] && break
		rs_p=$rs_q
	done
	rs_p=${rs_p#./}
	for rs_c in "$rs_p" "src/$2" "cuda/$2" "ui/$2"; do
		if [ -f "$rs_c" ]; then
			echo "$rs_c"
			return
		fi
	done
}

# strip: the C source on stdin with comments and string / character
# literals blanked to spaces, line for line (the quotes themselves stay).
strip() {
	awk -v q="'" '
	{
		out = ""; n = length($0); i = 1
		while (i <= n) {
			c = substr($0, i, 1); d = substr($0, i, 2)
			if (st == "block") {
				if (d == "*/") { st = ""; out = out "  "; i += 2 }
				else { out = out " "; i++ }
				continue
			}
			if (st == "\"" || st == q) {
				if (c == "\\") { out = out "  "; i += 2; continue }
				if (c == st) { st = ""; out = out c } else out = out " "
				i++
				continue
			}
			if (d == "/*") { st = "block"; out = out "  "; i += 2; continue }
			if (d == "//") break
			if (c == "\"" || c == q) st = c
			out = out c; i++
		}
		if (st != "block") st = "" # a literal ends with its line
		print out
	}'
}

SILENT_CALLS='printf|vprintf|puts|putchar|perror|exit|_exit|_Exit|quick_exit|abort'
SILENT_NAMES='stdin|stdout|stderr|STDIN_FILENO|STDOUT_FILENO|STDERR_FILENO'
FRONT_HEADERS='(n?curses|ncursesw/.*|term|histedit|editline/.*|readline/.*|err)\.h'

# scan ROOT COUNTS: every violation of the rules above under ROOT, one a
# line; "FILES INCLUDES" (how many were looked at) goes to the file COUNTS,
# an absolute path.
scan() {
	(
		cd "$1" || exit 1
		nfiles=0
		nincl=0
		for f in $(find src ui cuda -type f \( -name '*.c' -o -name '*.h' \
			-o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | LC_ALL=C sort); do
			nfiles=$((nfiles + 1))
			layer_of "$f"
			fl=$layer
			fn=$lname
			# An unmapped file is reported; its other checks still run,
			# with src/ below ui/ whatever its module.
			if [ -z "$fl" ]; then
				echo "$f:1: unmapped: module not placed in a layer (tests/t_layers.sh)"
				fl=4 fn=library
			fi
			fmod=${f##*/}
			fmod=${fmod%.*}
			# Quoted includes: direction and privacy.
			grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
				sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1 \2/' >"$tmp/incl"
			while read -r line name; do
				nincl=$((nincl + 1))
				t=$(resolve "$f" "$name")
				if [ -z "$t" ]; then
					echo "$f:$line: unresolved: \"$name\" is no file of src/, ui/, cuda/"
					continue
				fi
				layer_of "$t"
				if [ -z "$layer" ]; then
					echo "$f:$line: unmapped: \"$name\" ($t) is in no layer"
				elif [ "$layer" -gt "$fl" ]; then
					echo "$f:$line: include-up: $fn includes $lname header $t"
				fi
				case ${t##*/} in
				*_int.h | *_impl.h)
					owner=${t##*/}
					owner=${owner%_*}
					case $fmod in
					"$owner" | "$owner"_*) ;;
					*) echo "$f:$line: private: ${t##*/} belongs to module $owner" ;;
					esac
					;;
				esac
			done <"$tmp/incl"
			# The library: no terminal, no printing, no exiting.
			case $f in
			ui/*) continue ;;
			esac
			grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<$FRONT_HEADERS>" "$f" |
				sed "s,^\([0-9]*\):[[:space:]]*\(.*\),$f:\1: front-end-header: \2,"
			strip <"$f" |
				grep -nE "(^|[^A-Za-z0-9_.>])(($SILENT_CALLS)[[:space:]]*\(|write[[:space:]]*\([[:space:]]*[12][[:space:]]*,)|(^|[^A-Za-z0-9_])($SILENT_NAMES)([^A-Za-z0-9_]|$)" |
				sed "s,^\([0-9]*\):[[:space:]]*\(.*\),$f:\1: prints-or-exits: \2,"
		done
		echo "$nfiles $nincl" >"$2"
	)
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- self-test: a planted tree where each rule must fire ------------------
p=$tmp/planted
mkdir -p "$p/src" "$p/ui" "$p/cuda"
for h in utf8 gguf tok template session store store_int; do
	echo "/* $h.h */" >"$p/src/$h.h"
done
echo "/* repl.h */" >"$p/ui/repl.h"
cat >"$p/src/model.c" <<'EOF'
#include "gguf.h"
#include "session.h"
#include "tok.h"
#include "template.h"
EOF
printf '#include "utf8.h"\n#include "../ui/repl.h"\n' >"$p/src/gguf.c"
cat >"$p/cuda/k.cu" <<'EOF'
#include "gguf.h"
#include "tok.h"
#include "store.h"
__global__ void k(void) { printf("x"); }
EOF
cat >"$p/src/engine.c" <<'EOF'
#include "gguf.h"
void e(void)
{
	printf("x\n");
	fprintf(stderr, "x");
	puts("x");
	perror("x");
	exit(1);
	abort();
	FILE *o = stdout;
	write(2, "x", 1);
}
EOF
cat >"$p/src/trace.c" <<'EOF'
#include "gguf.h"
/* printf("x"); exit(1); to stderr
   and puts("y") */
void t(FILE *f, char *buf, size_t n)
{
	fprintf(f, "printf(\"exit(1)\") stderr"); // puts("x"), abort()
	snprintf(buf, n, "%c", '"');
	int exit_code = 0, my_stdout = 1;
	my_exit(exit_code);
	be->abort(my_stdout);
	fwrite(buf, 1, n, f);
}
EOF
printf '#include "store.h"\n#include "store_int.h"\n' >"$p/src/store_fmt.c"
printf '#include "store_int.h"\n' >"$p/src/session.c"
printf '#include <stdio.h>\n#include <ncurses.h>\n#include <histedit.h>\n' >"$p/src/sampler.c"
printf '#include "utf8.h"\n#include "nosuch.h"\n' >"$p/src/json.c"
printf 'int x;\n' >"$p/src/newthing.c"
cat >"$p/ui/cmd_x.c" <<'EOF'
#include <ncurses.h>
#include "session.h"
#include "repl.h"
int cmd_x(void) { printf("x\n"); exit(0); }
EOF

scan "$p" "$tmp/planted.n" >"$tmp/planted.out"
while IFS='|' read -r want what; do
	grep -Fq "$want" "$tmp/planted.out"
	ok $? "self-test: reports $what"
done <<'EOF'
src/model.c:2: include-up: model includes session header src/session.h|model -> session
src/model.c:3: include-up: model includes text header src/tok.h|model -> text (tok)
src/model.c:4: include-up: model includes text header src/template.h|model -> text (template)
src/gguf.c:2: include-up: model includes front-end header ui/repl.h|src/ -> ui/ through ../
cuda/k.cu:2: include-up: model includes text header src/tok.h|cuda/ -> tok
cuda/k.cu:3: include-up: model includes session header src/store.h|cuda/ -> store
cuda/k.cu:4: prints-or-exits|printf in a kernel
src/engine.c:4: prints-or-exits|printf
src/engine.c:5: prints-or-exits|fprintf(stderr)
src/engine.c:6: prints-or-exits|puts
src/engine.c:7: prints-or-exits|perror
src/engine.c:8: prints-or-exits|exit
src/engine.c:9: prints-or-exits|abort
src/engine.c:10: prints-or-exits|a FILE * set to stdout
src/engine.c:11: prints-or-exits|write(2, ...)
src/session.c:1: private: store_int.h belongs to module store|store_int.h outside store
src/sampler.c:2: front-end-header|<ncurses.h> in the library
src/sampler.c:3: front-end-header|<histedit.h> in the library
src/json.c:2: unresolved|an include of no project file
src/newthing.c:1: unmapped|an unmapped src/ module
EOF
# The legal look-alikes: ui/ prints and includes what it likes, a trace
# writes to its caller's FILE *, comments and strings mention printf.
for legal in src/trace.c src/store_fmt.c ui/cmd_x.c src/model.c:1: src/gguf.c:1: cuda/k.cu:1: \
	src/sampler.c:1: src/json.c:1:; do
	! grep -Fq "$legal" "$tmp/planted.out"
	ok $? "self-test: nothing reported for $legal"
done
n=$(grep -c . "$tmp/planted.out")
[ "$n" -eq 20 ]
ok $? "self-test: exactly the 20 planted violations ($n reported)"
[ "$n" -eq 20 ] || sed 's/^/# /' "$tmp/planted.out"

# --- the real tree ----------------------------------------------------------
scan "${top_srcdir:-.}" "$tmp/real.n" >"$tmp/real.out"
read -r nfiles nincl <"$tmp/real.n"
diag "scanned $nfiles files under src/ ui/ cuda/, $nincl quoted includes"
[ "$nfiles" -ge 50 ] && [ "$nincl" -ge 100 ]
ok $? "the real tree was scanned (at least 50 files, 100 includes)"
for rule in unmapped include-up unresolved private front-end-header prints-or-exits; do
	grep -q ": $rule: " "$tmp/real.out"
	[ $? -ne 0 ]
	ok $? "no $rule violation in src/ ui/ cuda/"
	grep ": $rule: " "$tmp/real.out" | sed 's/^/# /'
done
done_testing
