"""One config class per concern; each maps onto a Hydra group under configs/."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ModelConfig:
    path: str | None = None  # a .gguf file or an HF-style directory; None: the embedded default
    served_model_name: str | None = None  # default: derived from the checkpoint
    dtype: str = "auto"  # auto (float32 on CPU, float16 on CUDA) | float32 | float16 | bfloat16
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    max_model_len: int | None = None  # default: the checkpoint's context length
    dense: bool = False  # True: dequantize quantized checkpoints at load (default: keep their format)
    enforce_eager: bool = False  # True: no CUDA graphs (decode steps launch kernel by kernel)


@dataclass
class CacheConfig:
    block_size: int = 16
    num_blocks: int | None = None  # default: sized from kv_cache_memory_gib / GPU memory utilization
    kv_cache_memory_gib: float = 1.0  # CPU: memory given to the KV cache when num_blocks is unset
    gpu_memory_utilization: float = 0.8
    enable_prefix_caching: bool = True
    # the paged K / V tensors' element: auto (the compute dtype, or that dtype by name) | float8_e4m3fn |
    # float8_e5m2 (FP8: stored as fp8(x), scale 1; decoded by the attention kernels, in software on Volta)
    dtype: str = "auto"


@dataclass
class SchedulerConfig:
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048  # token budget per step; long prompts are chunked under it
    enable_chunked_prefill: bool = True
    # Schedule step n+1 while the GPU runs step n: each decode row feeds the token sampled last step
    # straight from the device, and the host learns it one step later (outputs then trail by a
    # step). Steps with drafts, logprobs or penalties (which need the values) run synchronously.
    # On by default: same tokens, and the H200 measured 0.97 -> 0.88 ms per smollm2 step, 12.5 ->
    # 10.2 ms per llama3-8b batch-64 step (benchmarks/results/h200-2026-11-29-s5/decode-ab.log).
    async_scheduling: bool = True
    # "fcfs": arrival order; "priority" (vLLM's): requests with a lower `priority` value are admitted first, and
    # when the KV pool runs dry the running request with the highest (priority, arrival) is preempted
    policy: str = "fcfs"
    # False (vLLM v1's way): a step's budget goes to the running requests' decode rows first, and prompts fill the
    # rest. True (SGLang's default, vLLM v0's without chunked prefill): while a waiting prompt can be admitted (a seat
    # and KV blocks for its first chunk are free) or a running one is still in its prompt, steps run prompt chunks
    # only and the decode rows wait, so a batch that arrives together decodes together, as llama-batched-bench runs
    # it (no first token later, the streams already decoding paused meanwhile).
    prefill_first: bool = False


@dataclass
class SpecConfig:
    method: str = "none"  # none | ngram | draft | mtp
    num_speculative_tokens: int = 5  # drafts per step at most (verify steps feed k + 1 tokens)
    ngram_min: int = 2
    ngram_max: int = 4
    # method draft: either the target's first draft_layers blocks (+ final norm, LM head; self-
    # speculation sharing the target's weights), or a checkpoint (GGUF / HF dir) with the target's vocabulary
    draft_layers: int = 0
    draft_model: str | None = None
    draft_num_blocks: int | None = None  # the draft's own KV pool; None: as many blocks as the target's
    # method mtp: safetensors file(s) (a file or a directory) holding the MTP layer under its checkpoint names
    mtp_path: str | None = None


@dataclass
class EngineConfig:
    model: ModelConfig = field(default_factory=ModelConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    spec: SpecConfig = field(default_factory=SpecConfig)
    seed: int = 0


@dataclass
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    log_level: str = "info"
    chat_template: str | None = None  # a file or inline Jinja that replaces the model's (vLLM's --chat-template)
    embeddings: bool = False  # /v1/embeddings: the last token's final hidden state, L2-normalized (vLLM / llama.cpp)
    tool_call_parser: str | None = None  # "hermes" / "llama3_json": tool_choice "auto" (tool_calls.py)
    reasoning_parser: str | None = None  # "qwen3" / "deepseek_r1": think blocks as `reasoning` (serve/reasoning.py)
