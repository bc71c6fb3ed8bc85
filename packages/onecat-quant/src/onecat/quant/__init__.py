"""onecat.quant: reference codecs for quantized weight formats (CPU torch, vectorized, bit-exact).

Modules (each documents its bit layout in its docstring):

* :mod:`.ggml` -- GGUF tensor data: ``dequantize(raw, shape, "Q4_K")`` / ``quantize(x, "Q8_0")``;
  layouts in :mod:`.gguf_blocks` (F32/F16/BF16, Q4_0..Q8_0), :mod:`.gguf_kquants` (Q2_K..Q6_K),
  :mod:`.gguf_iquants` (IQ4_NL, IQ4_XS, IQ3_S, IQ3_XXS; codebooks read from gguf-py).
* :mod:`.fp8` -- E4M3FN / E5M2 software encode/decode, per-tensor / per-channel / block scales.
* :mod:`.fp4` -- E2M1, NVFP4 (ModelOpt) and MXFP4 (OCP MX).
* :mod:`.int4` -- AWQ and GPTQ int32-packed weights; :mod:`.int4_ct` -- compressed-tensors pack-quantized.
* :mod:`.formats` -- ``FORMATS`` registry: name -> :class:`~.formats.QuantFormat`; ``get_format(name)``.

Malformed input (byte count vs shape, row length vs block size, unknown type/format name, wrong
shapes of scale tensors) raises ``ValueError`` naming the tensor (when given ``name=``), the format
and the reason.
"""

from .formats import FORMATS, QuantFormat, get_format

__all__ = ["FORMATS", "QuantFormat", "get_format"]
