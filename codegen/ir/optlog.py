"""The optimisation-path log: every decision one parsable line.

    [OPT] <stage> <subject> <decision> reason=<code> key=value ...

Reasons come from the closed catalogue below (like oneDNN's verbose_msg.hpp),
so a reader can grep for a reason code and know what it means. Lines are
collected in order and written when DEBUG_OPTIMIZATION_PATH=ON.
"""
from __future__ import annotations

REASONS = {
    "dedup": "op instance has the same Opspec as an earlier one; the kernel is generated once",
    "new_kernel": "first op instance with this Opspec",
    "family_rule": "kernel family fixed by op kind (no algorithm search yet)",
    "tile_fit": "largest tile of the rule that fits every on-chip buffer of the profile (double-buffered)",
    "tile_shrunk": "a larger tile did not fit a buffer; the named buffer was the limit",
    "balance_cores": "tile reduced so the blocks cover more AI cores",
    "option": "a build option decided this",
    "winograd_dtype": "KILN_DTYPE=bf16: direct img2col, no Winograd. At bf16's unit roundoff (2^-8, 8x fp16's) "
                      "F(4,3)'s expected error (error_bound_f4, about 8%) is over the 2% gate; F(2,3)'s (about 0.8%) "
                      "is not, but the Winograd kernel's transforms and GEMM are fp16 only so far",
    "tuning_record": "the variant comes from KILN_TUNING_RECORDS (measured on the emulator by `kiln tune`), no search",
    "opt_level": "the option was left empty, so KILN_OPT_LEVEL set it (codegen/options.py OPT_LEVELS)",
    "no_kernel": "the AI CPU fallback: no AI Core kernel family runs this op (and it is not one issue 19 gives a "
                 "kernel), so it runs on the AI CPU as a host step between the AI Core launches before and after it, "
                 "evaluated by the onnx package's reference evaluator (codegen/frontend/onnx_aicpu.py; cost: "
                 "codegen/cost/aicpu.py)",
    "view_or_relayout": "a lowering decision: a reshape shares its input's bytes, a layout change needs a host "
                        "relayout step, or a pattern (bias, transposed B, GELU, LayerNorm) became one kernel",
    "memory_plan": "arena placement of the model's intermediate tensors: the smaller of greedy-by-size and best-fit",
    "in_place": "an elementwise or row-wise kernel writes its output over its first input, which dies there",
    "l2_residency": "which of a kernel step's inputs are in L2 when it starts (H hit, m miss, per input in the "
                    "kernel's order): least-recently-used whole tensors against the profile's L2 size, cold at the "
                    "start of a run (codegen/passes/l2.py)",
    "l2_plan": "the search ranked the kernel's tilings again with its model steps' L2 hits "
               "(codegen/select/l2_search.py): the sum of the steps' predicted cycles; before: the tiling ranked with "
               "every read a miss, after: this one",
    "frontend_pass": "a frontend graph pass (constant folding, BN folding, Identity removal; an op rewritten into "
                     "ops with kernels: InstanceNormalization, GroupNormalization, LRN)",
    "opset_converted": "the file's opset (7..12) is older than the op table's (13..21): onnx's version converter "
                       "rewrote the model to opset 13 before import",
    "pinned_shape": "the model spec (file.onnx@INPUT=DxD...) fixed this input's shape; dynamic dims take its values",
    "epilogue_fixpipe": "the activation is applied by Fixpipe on the way out of L0C (Cube kernels)",
    "epilogue_vector": "the activation is two more Vector instructions in the kernel's own pass over UB",
    "vector_chain": "consecutive Vector operations run as one pass over UB",
    "epilogue_vector_core": "a residual add or a clip after a Cube kernel runs as a Vector-core pass in the same "
                            "kernel (through GM/L2 on split profiles such as ascend910b)",
    "vector_epilogue": "this Cube kernel ends with a Vector pass (residual add and/or clip): on split profiles a "
                       "Vector-core launch through GM/L2, on coupled ones (Cube and Vector in one core) L0C -> UB "
                       "on chip",
    "fixpipe_no_clip": "rejected: Fixpipe applies ReLU but not Clip/ReLU6; that needs a Vector pass no kernel has yet",
    "fixpipe_no_gelu": "rejected: GELU is not a Fixpipe function; it needs a Vector pass no kernel has yet",
    "fixpipe_no_relu": "rejected: (not used) Fixpipe has ReLU",
    "epilogue_unsupported": "rejected: the producing kernel family has no such epilogue",
    "no_program_epilogue": "rejected: an elementwise-program op after a ConvTranspose or GEMM runs as its own Vector "
                           "kernel; no such Cube kernel takes a program epilogue yet",
    "program_epilogue_slower": "rejected by the cost model: the Cube convolution with the program in its Vector "
                               "epilogue predicts at least as many cycles as the convolution and the program's own "
                               "Vector kernel (both planned by the rule; the cycles are logged)",
    "channel_layernorm_unsupported": "rejected: a LayerNormalization over the channels of an NCHW tensor (after a "
                                     "Transpose to NHWC) the fused kernel does not take (scale or bias not constants "
                                     "of C values, Mean/InvStdDev used, C > 4096); the Transpose runs as a copy",
    "channel_layernorm": "Transpose(0,2,3,1) -> LayerNormalization(last axis) as one Vector kernel: the channels read "
                         "as NC1HWC0 holds them (one strided copy per tile of pixels), the normalised rows written; "
                         "the transposed tensor is never stored (fused and unfused predicted cycles in the line)",
    "not_priced": "rejected: the choice needs the cost model's replay and the tensor is larger than fusion prices at "
                  "plan time (codegen/passes/pricing.py); the ops stay separate kernels",
    "channel_layernorm_slower": "rejected by the cost model: the fused channel LayerNorm is predicted no faster than "
                                "the Transpose's copy plus the LayerNorm over rows",
    "program_epilogue": "the elementwise program runs in the producing kernel's own pass over UB (a depthwise conv's "
                        "or a Resize's rows, a Cube conv's Vector epilogue) on fp32 values before the cast to fp16 "
                        "(instruction-level fusion)",
    "no_epilogue": "rejected: the producing kernel family takes no epilogue",
    "pad_into_conv": "taken: a zero constant Pad of H and W before a Conv is the Conv's own padding (exact)",
    "pad_not_foldable": "rejected: the Pad is not a zero constant pad of H and W read only by a Conv (no Pad kernel)",
    "fusion_off": "rejected: ENABLE_FUSION=OFF",
    "multiple_consumers": "rejected: the producer's output is read by another op too, so it must be stored",
    "depth_limit": "rejected: the fused kernel would absorb more source ops than MAX_FUSION_DEPTH",
    "activation_taken": "rejected: the producing kernel already ends with an activation",
    "residual_taken": "rejected: the producing convolution already adds a residual",
    "second_source_l0c": "both operands of an add are convolutions read only by it: the 1x1 one (e.g. a "
                         "downsample) is accumulated into the other's L0C as a second source (no GM round trip, "
                         "the add is free)",
    "chain_l1": "a window conv read only by a 1x1 conv: one kernel keeps the first result's tile in L1 (Fixpipe "
                "L0C -> L1, ReLU on the way) and the 1x1 conv reads it from there; no GM round trip",
    "chain_unsupported": "rejected: no kernel chains these two convolutions yet (a depthwise conv runs on the Vector "
                         "unit and a pointwise one on the Cube: on split profiles such as ascend910b the tile would "
                         "go through GM/L2 between different cores)",
    "chain_idle_cores": "rejected: a chained kernel's block is a whole M tile (all channels of both convs); the map "
                        "has fewer 16-pixel tiles than the profile has Cube cores, so cores would idle",
    "flash_attention": "Q.K^T -> scale -> softmax -> .V as one flash-attention kernel (online softmax over kv tiles): "
                       "the score and probability matrices never go to GM",
    "packed_heads": "an attention's Q, K and V cut from one packed projection (torch.nn.MultiheadAttention's export: "
                    "Reshape, Unsqueeze, Transpose, Squeeze, a Gather each, then per head Reshape and Transpose) are "
                    "one Transpose of the projection to [3, batch, heads, seq, head_dim] and three contiguous slices "
                    "of it; scales on Q and K^T become one scale after Q.K^T (codegen/passes/mha.py)",
    "option_off": "rejected: the build option for this fusion is OFF (e.g. USE_FLASH_ATTENTION=OFF)",
    "seq_exceeds_max_seq_len": "rejected: the attention's key/value sequence is longer than MAX_SEQ_LEN",
    "attention_unsupported": "rejected: an attention-shaped chain the flash-attention kernel does not take (a mask, "
                             "another softmax axis, other shapes or K layout)",
    "capacity": "rejected: the fused kernel's on-chip footprint exceeds the profile's buffer",
    "second_source_unsupported": "rejected: neither operand can be a second source (it must be a plain 1x1 "
                                 "convolution, unpadded, square stride, nothing fused, its input ready in time)",
    "cost_model": "the variant with the fewest cycles predicted by the pipe cost model (codegen/cost/model.py); for a "
                  "tiling search: candidates enumerated, those that fit the buffers ranked, the best replayed exactly",
    "grouped_conv": "a grouped convolution (1 < group, not depthwise): the Cube's block-diagonal img2col kernel "
                    "(Winograd and the Vector conv take dense convolutions only)",
    "winograd_illegal": "Winograd needs a 3x3 kernel, stride 1 and dilation 1; direct convolution",
    "winograd_error_bound": ("rejected: the tile's expected fp16 error (codegen/ir/winograd.py expected_error) exceeds "
                             "the tolerance"),
    "winograd_tile_waste": ("rejected by the cost model: partial edge tiles waste work (output not a multiple of the "
                            "tile)"),
    "winograd_channels": "rejected by the cost model: channels do not fill the Cube's 16-wide fractals",
    "winograd_small_map": "rejected by the cost model: too few tiles to fill the Cube and cover the transform overhead",
    "winograd_slower": "rejected by the cost model: transform passes cost more than the multiplications saved",
    "siblings_one_gemm": "GEMMs reading the same activation run as one GEMM over their weights side by side; each "
                         "result is a contiguous slice of its output",
    "sibling_shapes": ("rejected: sibling GEMMs whose results are not equally wide (multiple of 16) or differ in "
                       "epilogue"),
    "sibling_taken": ("not fused as siblings: one of the convolutions is already in a two-source kernel "
                      "(second_source_l0c)"),
    "sibling_conv_unsupported": "audited: convolutions reading one input; no conv kernel writes two results yet",
    "graph_output": "rejected: the result is a graph output, which cannot be a slice of another tensor",
    "vector_slower": "rejected by the cost model: the conv on the Vector unit alone (conv2d_vector) takes more cycles "
                     "than on the Cube",
    "vector_unsupported": "rejected: conv2d_vector cannot implement this conv (second source, chain, bf16 weights)",
    "operand_order": "rejected: the add's other operand is computed after the convolution that would take it",
    "shape_buckets": "KILN_SHAPE_BUCKETS: the image model gets a plan per listed square input size besides its own",
    "shape_bucket": "a bucket size's plan: the graph re-shaped to that size, fused, lowered and its kernels baked",
    "not_image_model": "KILN_SHAPE_BUCKETS skips the model: buckets need exactly one 4-D (NCHW) input",
    "generic_path": "other input sizes run on generic kernels (runtime shapes); the kernels whose spec does not "
                    "depend on the size are the baked ones",
    "generic_kernel": "a kernel whose spec depends on the input size runs on the generic kernel of its structural "
                      "spec (spatial dims and tiling at run time; channels, window and epilogue compiled in)",
    "no_generic_form": "no generic path: a kernel depends on the input size but its family has no generic mode, or "
                       "the model's steps differ between sizes",
    "size_dependent_constant": "no generic path: the graph does not take other sizes (e.g. a Reshape target "
                               "folded at build time for the model's own size)",
}


class OptLog:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, stage: str, subject: str, decision: str, reason: str, **fields) -> None:
        if reason not in REASONS:
            raise ValueError(f"reason code {reason!r} is not in the catalogue")
        kv = " ".join(f"{k}={_fmt(v)}" for k, v in fields.items())
        self.lines.append(f"[OPT] {stage} {subject} {decision} reason={reason}" + (f" {kv}" if kv else ""))

    def text(self) -> str:
        return "\n".join(self.lines) + ("\n" if self.lines else "")


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "x".join(map(str, v))
    return str(v).replace(" ", "_")
