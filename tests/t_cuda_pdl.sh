#!/bin/sh
# t_cuda_pdl.sh - the invariant of programmatic dependent launch
# (cuda/cuda_launch.cuh), checked in the source: a kernel launched with
# PDL may start while the previous kernel still runs, so it must wait
# (cu_pdl_sync or cu_pdl_wait) before it touches what that kernel writes,
# and before it can exit. In every cuda/*.cu that includes cuda_launch.cuh:
#   chevron-launch     a <<<...>>> launch (launches go through cu_launch,
#                      so that every kernel of the file is launched alike);
#   no-wait            a __global__ function whose body never calls
#                      cu_pdl_sync() or cu_pdl_wait();
#   return-before-wait a return in a kernel's body before its first wait.
# Comments and string literals are blanked first. Like t_layers.sh, the
# checker runs over a planted tree first (every rule must fire, the legal
# look-alikes must not), then over the real tree. Runs without a GPU.
. "${top_srcdir:-.}/tests/lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# scan DIR: report FILE:LINE: RULE for the files of DIR/cuda/*.cu.
scan() {
	for f in "$1"/cuda/*.cu; do
		[ -f "$f" ] || continue
		grep -q '#include "cuda_launch.cuh"' "$f" || continue
		awk -v name="cuda/${f##*/}" '
		# blank comments and string literals, keeping line numbers
		{
			line = $0; out = ""
			while (line != "") {
				if (incomment) {
					e = index(line, "*/")
					if (e == 0) { line = ""; break }
					line = substr(line, e + 2); incomment = 0
					continue
				}
				s = index(line, "/*"); d = index(line, "//")
				q = index(line, "\"")
				m = 0
				if (s && (!d || s < d) && (!q || s < q)) m = 1
				else if (d && (!q || d < q)) m = 2
				else if (q) m = 3
				if (m == 0) { out = out line; line = "" }
				else if (m == 1) {
					out = out substr(line, 1, s - 1) " "
					line = substr(line, s + 2); incomment = 1
				} else if (m == 2) {
					out = out substr(line, 1, d - 1); line = ""
				} else {
					out = out substr(line, 1, q - 1) "\"\""
					rest = substr(line, q + 1)
					e = match(rest, /(^|[^\\])"/)
					line = e ? substr(rest, e + RLENGTH) : ""
				}
			}
			code = out
			if (code ~ /<<</)
				printf "%s:%d: chevron-launch\n", name, NR
			if (code ~ /__global__/) { inkernel = 1; depth = 0; body = 0
				kline = NR; waited = 0 }
			if (inkernel) {
				n = split(code, ch, "")
				for (i = 1; i <= n; i++) {
					if (ch[i] == "{") { depth++; body = 1 }
					else if (ch[i] == "}") depth--
				}
				if (body && code ~ /cu_pdl_(sync|wait)[ \t]*\([ \t]*\)/)
					waited = 1
				if (body && !waited && code ~ /(^|[^A-Za-z0-9_])return([^A-Za-z0-9_]|$)/)
					printf "%s:%d: return-before-wait\n", name, NR
				if (body && depth == 0) {
					if (!waited)
						printf "%s:%d: no-wait\n", name, kline
					inkernel = 0
				}
			}
		}' "$f"
	done
}

# --- the planted tree -------------------------------------------------------
mkdir -p "$tmp/p/cuda"
cat >"$tmp/p/cuda/k.cu" <<'EOF'
#include "cuda_launch.cuh"
__global__ void fine(float *x) /* cu_pdl_sync() named in a comment */
{
	cu_pdl_sync();
	if (x == 0)
		return;
	x[0] = 1.0f;
}
__global__ void prefetching(const float *w, float *x)
{
	const float *p = w + threadIdx.x; /* "return" in a comment */
	cu_pdl_wait();
	x[0] = *p;
}
__global__ void never(float *x)
{
	/* cu_pdl_sync(); only in a comment */
	const char *s = "cu_pdl_wait()";
	x[0] = s[0];
}
__global__ void early(float *x)
{
	if (x == 0)
		return;
	cu_pdl_sync();
	x[0] = 2.0f;
}
void launch(struct cuda_ctx *ctx, float *x)
{
	fine<<<1, 32, 0, ctx->stream>>>(x);
	cu_launch(ctx, fine, 1, 32, 0, x); /* <<<not a launch>>> */
}
EOF
cat >"$tmp/p/cuda/plain.cu" <<'EOF'
/* no cuda_launch.cuh: launches and kernels are ordinary */
__global__ void k(float *x)
{
	x[0] = 0;
}
void go(float *x) { k<<<1, 1>>>(x); }
EOF
scan "$tmp/p" >"$tmp/planted.out"
while IFS='|' read -r want what; do
	grep -Fqx "$want" "$tmp/planted.out"
	ok $? "self-test: reports $what"
done <<'EOF'
cuda/k.cu:15: no-wait|a kernel that never waits (its wait only in a comment and a string)
cuda/k.cu:24: return-before-wait|a return before the wait
cuda/k.cu:30: chevron-launch|a <<<>>> launch beside cu_launch
EOF
n=$(grep -c . "$tmp/planted.out")
[ "$n" -eq 3 ]
ok $? "self-test: exactly the 3 planted violations ($n reported)"
[ "$n" -eq 3 ] || sed 's/^/# /' "$tmp/planted.out"

# --- the real tree ----------------------------------------------------------
top=${top_srcdir:-.}
nk=$(cat "$top"/cuda/*.cu | grep -c '__global__')
nf=$(grep -l '#include "cuda_launch.cuh"' "$top"/cuda/*.cu | grep -c .)
diag "$nf files with PDL launches, $nk kernels in cuda/"
[ "$nf" -ge 3 ]
ok $? "the op files include cuda_launch.cuh (at least 3)"
scan "$top" >"$tmp/real.out"
[ ! -s "$tmp/real.out" ]
ok $? "every kernel of those files waits before its first return, none launched by <<<>>>"
sed 's/^/# /' "$tmp/real.out"
done_testing
