"""Structured outputs (onecat.serve.structured, xgrammar) on the real SmolLM2 GGUF (CPU): the output matches its
JSON schema, object, regex, choices or EBNF grammar, sampled or greedy, with speculative decoding configured;
what xgrammar refuses is a ValueError before anything is queued."""

from __future__ import annotations

import json
import re

import pytest

from onecat.serve.config import EngineConfig, SpecConfig
from onecat.serve.engine import LLMEngine
from onecat.serve.model_runner import ModelRunner
from onecat.serve.sampling_params import SamplingParams
from onecat.serve.structured import StructuredOutputs

PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age", "city"],
          "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer"},
                         "city": {"enum": ["Paris", "Rome", "Oslo"]}}}
ASK = [{"role": "user", "content": "Describe a person as JSON with a name, an age and a city."}]


def person_ok(text: str) -> bool:
    v = json.loads(text)
    return (sorted(v) == ["age", "city", "name"] and isinstance(v["name"], str) and len(v["name"]) <= 12
            and isinstance(v["age"], int) and v["city"] in ("Paris", "Rome", "Oslo"))


def generate(llm, so: StructuredOutputs, **kw):
    params = SamplingParams(**({"temperature": 0, "max_tokens": 96} | kw), structured_outputs=so)
    return [c for o in llm.chat(ASK, params) for c in o.outputs]


def test_json_schema_greedy_and_sampled(llm):
    out = generate(llm, StructuredOutputs(json=PERSON))[0]
    assert out.finish_reason == "stop" and person_ok(out.text), out.text
    sampled = generate(llm, StructuredOutputs(json=json.dumps(PERSON)), temperature=1.0, seed=7, n=3)
    assert len(sampled) == 3 and all(c.finish_reason == "stop" and person_ok(c.text) for c in sampled)
    free = llm.chat(ASK, SamplingParams(temperature=0, max_tokens=96))[0].outputs[0]
    assert free.text != out.text  # the constraint is what made it JSON


@pytest.mark.parametrize("so, check", [
    (StructuredOutputs(json_object=True), lambda t: isinstance(json.loads(t), dict)),
    (StructuredOutputs(regex=r"[0-9]{3}-[0-9]{4}"), lambda t: re.fullmatch(r"[0-9]{3}-[0-9]{4}", t)),
    (StructuredOutputs(choice=["yes", "no", "it \"depends\""]), lambda t: t in ("yes", "no", 'it "depends"')),
    (StructuredOutputs(grammar='root ::= "a" [b-d]+ "e"'), lambda t: re.fullmatch(r"a[b-d]+e", t)),
])
def test_each_kind_matches(llm, so, check):
    out = generate(llm, so, max_tokens=200)[0]
    assert out.finish_reason == "stop" and check(out.text), out.text


def test_with_speculative_decoding_configured(llm):
    """An n-gram drafter proposes for the other requests; the structured one takes no drafts and stays valid."""
    cfg = EngineConfig(spec=SpecConfig(method="ngram", num_speculative_tokens=3))
    eng = LLMEngine(cfg, runner=ModelRunner(cfg, loaded=llm.engine.runner.loaded, progress=False))
    prompt = llm.tokenizer.apply_chat_template(ASK, add_generation_prompt=True, tokenize=True)
    eng.add_request("free", "1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 1, 2, 3,",
                    SamplingParams(temperature=0, max_tokens=24))
    eng.add_request("json", prompt, SamplingParams(temperature=0, max_tokens=96,
                                                   structured_outputs=StructuredOutputs(json=PERSON)))
    done = {}
    while eng.has_unfinished_requests():
        done.update({o.request_id: o.outputs[0] for o in eng.step() if o.finished})
    assert person_ok(done["json"].text) and eng.scheduler.spec_proposed > 0


@pytest.mark.parametrize("so, msg", [
    (StructuredOutputs(json={"type": "nonsense"}), r"structured output json: Unsupported type"),
    (StructuredOutputs(regex="(["), r"structured output regex: .*\["),
    (StructuredOutputs(grammar="root ::= missing"), r"structured output grammar: "),
])
def test_what_xgrammar_refuses_is_a_value_error(llm, so, msg):
    with pytest.raises(ValueError, match=msg):
        llm.engine.add_request("bad-grammar", "Hi", SamplingParams(structured_outputs=so))
    assert "bad-grammar" not in llm.engine.groups and not llm.engine.scheduler.has_unfinished()


@pytest.mark.parametrize("kw, msg", [({}, "got none"), ({"regex": "a", "choice": ["a"]}, "got regex, choice"),
                                     ({"choice": []}, "non-empty list"), ({"choice": ["a", ""]}, "non-empty")])
def test_exactly_one_constraint(kw, msg):
    with pytest.raises(ValueError, match=msg):
        StructuredOutputs(**kw)
