# bench/shapes.sh - real models' shapes for parley's random-weight writer
# (`parley dev-mkmodel $(shape NAME)`), sourced by the GPU machine's
# scripts (vs-llamacpp.sh, session-shapes.sh). Each line is a model's
# published configuration; the writer fills it with random weights.

shape() {
	case $1 in
	qwen2.5-7b) echo "--arch qwen2 --n-vocab 152064 --n-embd 3584 --n-ff 18944 --n-layer 28 --n-head 28 --n-head-kv 4 --head-dim 128 --rope-base 1000000" ;;
	qwen3-0.6b) echo "--arch qwen3 --n-vocab 151936 --n-embd 1024 --n-ff 3072 --n-layer 28 --n-head 16 --n-head-kv 8 --head-dim 128 --rope-base 1000000 --tied" ;;
	qwen3-4b) echo "--arch qwen3 --n-vocab 151936 --n-embd 2560 --n-ff 9728 --n-layer 36 --n-head 32 --n-head-kv 8 --head-dim 128 --rope-base 1000000 --tied" ;;
	qwen3-8b) echo "--arch qwen3 --n-vocab 151936 --n-embd 4096 --n-ff 12288 --n-layer 36 --n-head 32 --n-head-kv 8 --head-dim 128 --rope-base 1000000" ;;
	gemma3-270m) echo "--arch gemma3 --n-vocab 262144 --n-embd 640 --n-ff 2048 --n-layer 18 --n-head 4 --n-head-kv 1 --head-dim 256 --rope-base 1000000 --sliding-window 512" ;;
	gemma3-1b) echo "--arch gemma3 --n-vocab 262144 --n-embd 1152 --n-ff 6912 --n-layer 26 --n-head 4 --n-head-kv 1 --head-dim 256 --rope-base 1000000 --sliding-window 512" ;;
	gemma3-4b) echo "--arch gemma3 --n-vocab 262208 --n-embd 2560 --n-ff 10240 --n-layer 34 --n-head 8 --n-head-kv 4 --head-dim 256 --rope-base 1000000 --sliding-window 1024 --rope-scaling linear --rope-scale-factor 8" ;;
	qwen3-30b-a3b) echo "--arch qwen3moe --n-vocab 151936 --n-embd 2048 --n-ff 6144 --n-layer 48 --n-head 32 --n-head-kv 4 --head-dim 128 --rope-base 1000000 --n-expert 128 --n-expert-used 8 --n-ff-exp 768" ;;
	qwen36-27b) echo "--arch qwen35 --n-vocab 248320 --n-embd 5120 --n-ff 17408 --n-layer 64 --n-head 24 --n-head-kv 4 --head-dim 256 --n-rot 64 --rope-sections 11,11,10,0 --rope-base 10000000 --ssm-conv-kernel 4 --ssm-state-size 128 --ssm-group-count 16 --ssm-time-step-rank 48 --ssm-inner-size 6144 --full-attention-interval 4" ;;
	gpt-oss-20b) echo "--arch gpt-oss --n-vocab 201088 --n-embd 2880 --n-ff 2880 --n-layer 24 --n-head 64 --n-head-kv 8 --head-dim 64 --rope-base 150000 --n-expert 32 --n-expert-used 4 --n-ff-exp 2880 --sliding-window 128 --rope-scaling yarn --rope-scale-factor 32 --yarn-orig-ctx 4096" ;;
	gpt-oss-120b) echo "--arch gpt-oss --n-vocab 201088 --n-embd 2880 --n-ff 2880 --n-layer 36 --n-head 64 --n-head-kv 8 --head-dim 64 --rope-base 150000 --n-expert 128 --n-expert-used 4 --n-ff-exp 2880 --sliding-window 128 --rope-scaling yarn --rope-scale-factor 32 --yarn-orig-ctx 4096" ;;
	qwen36-35b-a3b) echo "--arch qwen35moe --n-vocab 248320 --n-embd 2048 --n-ff 512 --n-layer 40 --n-head 16 --n-head-kv 2 --head-dim 256 --n-rot 64 --rope-sections 11,11,10,0 --rope-base 10000000 --ssm-conv-kernel 4 --ssm-state-size 128 --ssm-group-count 16 --ssm-time-step-rank 32 --ssm-inner-size 4096 --full-attention-interval 4 --n-expert 256 --n-expert-used 8 --n-ff-exp 512 --n-ff-shexp 512" ;;
	qwen3-14b) echo "--arch qwen3 --n-vocab 151936 --n-embd 5120 --n-ff 17408 --n-layer 40 --n-head 40 --n-head-kv 8 --head-dim 128 --rope-base 1000000" ;;
	qwen3-32b) echo "--arch qwen3 --n-vocab 151936 --n-embd 5120 --n-ff 25600 --n-layer 64 --n-head 64 --n-head-kv 8 --head-dim 128 --rope-base 1000000" ;;
	gemma3-27b) echo "--arch gemma3 --n-vocab 262208 --n-embd 5376 --n-ff 21504 --n-layer 62 --n-head 32 --n-head-kv 16 --head-dim 128 --rope-base 1000000 --sliding-window 1024 --rope-scaling linear --rope-scale-factor 8" ;;
	gemma3-12b) echo "--arch gemma3 --n-vocab 262208 --n-embd 3840 --n-ff 15360 --n-layer 48 --n-head 16 --n-head-kv 8 --head-dim 256 --rope-base 1000000 --sliding-window 1024 --rope-scaling linear --rope-scale-factor 8" ;;
	# Gemma 4 (transformers' convert_gemma4_weights.py variants): 5
	# sliding layers of 256-dim heads, then a global one of 512-dim heads
	# rotating a quarter of their pairs; a softcap of 30
	gemma4-31b) echo "--arch gemma4 --n-vocab 262144 --n-embd 5376 --n-ff 21504 --n-layer 60 --n-head 32 --n-head-kv 4 --head-dim 512 --n-head-kv-swa 16 --head-dim-swa 256 --sliding-window 1024 --sliding-window-pattern 6 --rope-base 1000000 --rope-base-swa 10000 --rope-partial 0.25 --attn-k-eq-v --final-logit-softcap 30" ;;
	gemma4-26b-a4b) echo "--arch gemma4 --n-vocab 262144 --n-embd 2816 --n-ff 2112 --n-layer 30 --n-head 16 --n-head-kv 2 --head-dim 512 --n-head-kv-swa 8 --head-dim-swa 256 --sliding-window 1024 --sliding-window-pattern 6 --rope-base 1000000 --rope-base-swa 10000 --rope-partial 0.25 --attn-k-eq-v --n-expert 128 --n-expert-used 8 --n-ff-exp 704 --final-logit-softcap 30" ;;
	gemma4-e4b) echo "--arch gemma4 --n-vocab 262144 --n-embd 2560 --n-ff 10240 --n-layer 42 --n-head 8 --n-head-kv 2 --head-dim 512 --head-dim-swa 256 --sliding-window 512 --sliding-window-pattern 6 --rope-base 1000000 --rope-base-swa 10000 --rope-partial 0.25 --kv-shared-layers 18 --n-embd-per-layer 256 --final-logit-softcap 30" ;;
	*) echo "shapes: unknown shape $1" >&2; exit 2 ;;
	esac
}

# The writer's options for the mix a shape's downloads come in: MXFP4
# experts and Q8_0 elsewhere for gpt-oss (as its files are), else the
# Q4_K_M mix (Q4_K, Q6_K for attn_v/ffn_down in llama.cpp's more-bits
# layers and the output; random valid blocks)
writer_mix() {
	case $1 in
	gpt-oss-*) echo "--type Q8_0 --expert-type MXFP4" ;;
	*) echo "--type Q4_K --more-bits-type Q6_K --out-type Q6_K --embd-type Q4_K" ;;
	esac
}
