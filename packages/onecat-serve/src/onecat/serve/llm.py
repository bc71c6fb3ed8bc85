"""Offline API: LLM(...).generate(prompts, SamplingParams(...)) and .chat(messages)."""

from __future__ import annotations

import itertools

from .config import EngineConfig, ModelConfig
from .engine import LLMEngine
from .outputs import RequestOutput
from .sampling_params import SamplingParams


_REQUEST_IDS = itertools.count()  # process-wide: LLMs over engines that share a runner never reuse an id


class LLM:
    def __init__(self, model: str | None = None, config: EngineConfig | None = None, progress: bool = True, **model_kw):
        config = config or EngineConfig(model=ModelConfig(path=model, **model_kw))
        self._attach(LLMEngine(config, progress=progress))

    @classmethod
    def from_engine(cls, engine: LLMEngine) -> "LLM":
        """The offline API over an engine built elsewhere (own spec / cache config, shared runner)."""
        llm = cls.__new__(cls)
        llm._attach(engine)
        return llm

    def _attach(self, engine: LLMEngine) -> None:
        self.engine = engine
        self.tokenizer = engine.tokenizer

    def generate(self, prompts, params: SamplingParams | list[SamplingParams] | None = None,
                 priority: list[int] | None = None) -> list[RequestOutput]:
        """prompts: a string, a list of token ids, or a list of either. Outputs keep prompt order. priority: one
        per prompt (lower first) under scheduler.policy=priority, as vLLM's."""
        if isinstance(prompts, str) or (isinstance(prompts, list) and prompts and isinstance(prompts[0], int)):
            prompts = [prompts]
        params = params or SamplingParams()
        plist = params if isinstance(params, list) else [params] * len(prompts)
        if len(plist) != len(prompts):
            raise ValueError(f"{len(plist)} sampling params for {len(prompts)} prompts")
        ranks = priority if priority is not None else [0] * len(prompts)
        if len(ranks) != len(prompts):
            raise ValueError(f"{len(ranks)} priorities for {len(prompts)} prompts")
        order = []
        for prompt, p, rank in zip(prompts, plist, ranks):
            rid = f"offline-{next(_REQUEST_IDS)}"
            self.engine.add_request(rid, prompt, p, priority=rank)
            order.append(rid)
        done: dict[str, RequestOutput] = {}
        while self.engine.has_unfinished_requests():
            for out in self.engine.step():
                if out.finished:
                    done[out.request_id] = out
        return [done[r] for r in order]

    def chat(self, messages: list[dict] | list[list[dict]], params: SamplingParams | None = None,
             add_generation_prompt: bool = True, chat_template_kwargs: dict | None = None,
             **template_kw) -> list[RequestOutput]:
        """Chat turns through the model's chat template (vLLM's LLM.chat): `tools`, `documents`,
        `continue_final_message`, `chat_template` and template variables as keywords or in chat_template_kwargs."""
        convs = messages if messages and isinstance(messages[0], list) else [messages]
        kw = {**(chat_template_kwargs or {}), **template_kw}
        prompts = [self.tokenizer.encode(self.tokenizer.apply_chat_template(c, add_generation_prompt=add_generation_prompt,
                                                                             **kw), add_special_tokens=False)
                   for c in convs]
        return self.generate(prompts, params)
