/*
 * cuda_repack.cu - the load-time rearrangement of Q8_0, Q6_K and Q4_K rows
 * into the GPU layouts of cuda_quant.cuh (note 5).
 *
 * NOTES ON THE DESIGN
 *
 * 1. Why: a GGUF Q8_0 block is 34 bytes and a Q6_K block 210, so in the
 *    file's layout the mat-vec can only read them 2 bytes at a time, and
 *    the Q6_K products ran well below Q4_K's, read 16 bytes at a time.
 *    Gathering each field of a row's blocks into one array makes every
 *    32-byte run of quants two aligned 16-byte loads.
 *    Q4_K blocks keep their place; their 6-bit scales and mins are only
 *    re-packed so that the mat-vec decodes them with shifts of registers
 *    instead of cq_scale_min_k4's byte loads and masks: the products issue
 *    fewer instructions per weight byte, which bounds them.
 * 2. Rows stay rows: a repacked row holds exactly its own blocks' bytes,
 *    padded to 16, so row r is still at r * row_size and every kernel
 *    that walks rows (embedding, GEMM dequantization, mat-vec) works on
 *    either layout through cq_row_elem / the units.
 * 3. The copy runs once at load on the device, from a staging buffer the
 *    caller filled with the file's rows: one thread per block, byte
 *    copies (the source blocks are only 2-byte aligned); the padding is
 *    written as zeros, so the arena's bytes are deterministic.
 */
#include "cuda_check.cuh"
#include "cuda_launch.cuh"
#include "cuda_ops.h"
#include "cuda_quant.cuh"

/* Block b of every row: SRC rows of SRC_ROW bytes (the file's layout)
 * into DST rows of DST_ROW bytes (layout T), NB blocks a row, N blocks in
 * all; the thread of block 0 also zeroes its row's padding. */
template <int T>
__global__ void rp_rows(const uint8_t *src, size_t src_row, uint8_t *dst,
                        size_t dst_row, int64_t nb, int64_t n)
{
	cu_pdl_sync(); /* first: cuda_launch.cuh */
	const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	if (idx >= n)
		return;
	const int64_t r = idx / nb, b = idx % nb;
	uint8_t *o = dst + (size_t)r * dst_row;

	if constexpr (T == CQ_Q4_KR) {
		const uint8_t *s = src + (size_t)r * src_row + (size_t)b * 144;
		uint8_t *ob = o + (size_t)b * 144;
		uint64_t sc = 0, mn = 0; /* 8 x 6 bits each */

		for (int j = 0; j < 8; j++) {
			int d, m;

			cq_scale_min_k4(j, s + 4, &d, &m);
			sc |= (uint64_t)d << (6 * j);
			mn |= (uint64_t)m << (6 * j);
		}
		for (int i = 0; i < 4; i++)
			ob[i] = s[i];
		for (int i = 0; i < 6; i++) {
			ob[4 + i] = (uint8_t)(sc >> (8 * i));
			ob[10 + i] = (uint8_t)(mn >> (8 * i));
		}
		for (int i = 16; i < 144; i++)
			ob[i] = s[i];
	} else if constexpr (T == CQ_Q8_0R) {
		const uint8_t *s = src + (size_t)r * src_row + (size_t)b * 34;

		for (int i = 0; i < 32; i++)
			o[b * 32 + i] = s[2 + i];
		o[nb * 32 + b * 2] = s[0];
		o[nb * 32 + b * 2 + 1] = s[1];
		if (b == 0)
			for (size_t i = (size_t)nb * 34; i < dst_row; i++)
				o[i] = 0;
	} else {
		const uint8_t *s = src + (size_t)r * src_row + (size_t)b * 210;

		for (int i = 0; i < 128; i++)
			o[b * 128 + i] = s[i];
		for (int i = 0; i < 64; i++)
			o[nb * 128 + b * 64 + i] = s[128 + i];
		for (int i = 0; i < 16; i++)
			o[nb * 192 + b * 16 + i] = s[192 + i];
		o[nb * 208 + b * 2] = s[208];
		o[nb * 208 + b * 2 + 1] = s[209];
		if (b == 0)
			for (size_t i = (size_t)nb * 210; i < dst_row; i++)
				o[i] = 0;
	}
}

extern "C" uint32_t cuda_repack_type(uint32_t type)
{
	return type == QTYPE_Q8_0   ? CQ_Q8_0R
	       : type == QTYPE_Q6_K ? CQ_Q6_KR
	       : type == QTYPE_Q4_K ? CQ_Q4_KR
	                            : type;
}

extern "C" size_t cuda_repack_row_size(uint32_t rtype, int64_t ne0)
{
	return cq_repack_row_size((int)rtype, ne0);
}

extern "C" int cuda_op_repack(struct cuda_ctx *ctx, uint32_t type, int64_t ne0,
                              int64_t n_rows, const void *d_src, void *d_dst,
                              char *err, size_t errlen)
{
	const uint32_t rt = cuda_repack_type(type);
	const struct qtype_info *qi = qtype_get(type);

	if (rt == type || ne0 % qi->blck_size != 0) {
		snprintf(err, errlen, "no GPU layout for %s rows of %lld",
		         qtype_name(type), (long long)ne0);
		return -1;
	}
	const int64_t nb = ne0 / qi->blck_size, n = nb * n_rows;
	const size_t src_row = (size_t)nb * qi->type_size;
	const unsigned blocks = (unsigned)((n + 255) / 256);

	if (n == 0)
		return 0;
	if (rt == CQ_Q8_0R)
		cu_launch(ctx, rp_rows<CQ_Q8_0R>, blocks, 256, 0,
		          (const uint8_t *)d_src, src_row, (uint8_t *)d_dst,
		          cq_repack_row_size(rt, ne0), nb, n);
	else if (rt == CQ_Q4_KR)
		cu_launch(ctx, rp_rows<CQ_Q4_KR>, blocks, 256, 0,
		          (const uint8_t *)d_src, src_row, (uint8_t *)d_dst,
		          cq_repack_row_size(rt, ne0), nb, n);
	else
		cu_launch(ctx, rp_rows<CQ_Q6_KR>, blocks, 256, 0,
		          (const uint8_t *)d_src, src_row, (uint8_t *)d_dst,
		          cq_repack_row_size(rt, ne0), nb, n);
	CUDA_TRY_LAUNCH(err, errlen);
	return 0;
}
