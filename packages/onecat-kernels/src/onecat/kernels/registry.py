"""Op registry: each op is declared once with its torch reference; providers are admitted per problem.

An op (`OpSpec`) carries its reference implementation, which is both its semantics and the route
of last resort (CPU, and any GPU where nothing faster is admitted). A provider (`Provider`)
registers for an op with an availability check (is NVRTC there? a GPU?) and `supports(problem)`,
which returns the reasons it refuses a problem (an empty list admits it). Selection walks a
priority list that always ends at the reference; a pinned provider that is refused is an error
listing its reasons. Selections are cached per problem, so dispatch in the hot path is a dict
lookup.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

REFERENCE = "torch"


@dataclass(frozen=True)
class Problem:
    """What a provider needs to know to admit or refuse one call shape.

    `params` holds the op-specific facts that matter (head_dim, weight format, ...) as sorted
    (key, value) pairs, so problems are hashable and printable.
    """

    op: str
    device: str  # "cpu" or "cuda"
    capability: tuple[int, int] | None  # (major, minor) on CUDA, None on CPU
    dtype: str
    params: tuple[tuple[str, Any], ...] = ()
    graph_capture: bool = False

    def param(self, key: str, default: Any = None) -> Any:
        for k, v in self.params:
            if k == key:
                return v
        return default

    def describe(self) -> str:
        cap = f"sm{self.capability[0]}{self.capability[1]}" if self.capability else self.device
        extra = ", ".join(f"{k}={v}" for k, v in self.params)
        return f"{self.op}[{cap}, {self.dtype}{', ' + extra if extra else ''}]"


@dataclass
class Provider:
    name: str
    op: str
    fn: Callable[..., Any]
    available: Callable[[], list[str]] = field(default=lambda: [])
    supports: Callable[[Problem], list[str]] = field(default=lambda problem: [])

    def refusal(self, problem: Problem) -> list[str]:
        reasons = list(self.available())
        if not reasons:
            reasons = list(self.supports(problem))
        return reasons


@dataclass
class OpSpec:
    name: str
    reference: Callable[..., Any]
    doc: str = ""
    make_inputs: Callable[..., Any] | None = None
    tolerances: dict[str, float] = field(default_factory=dict)


@dataclass
class Selection:
    problem: Problem
    provider: Provider
    refused: dict[str, list[str]]

    def table_rows(self) -> list[tuple[str, str, str]]:
        rows = [(self.problem.op, self.provider.name, "admitted")]
        rows += [(self.problem.op, name, "; ".join(r)) for name, r in self.refused.items()]
        return rows


class AdmissionError(RuntimeError):
    pass


class KernelRegistry:
    def __init__(self) -> None:
        self.ops: dict[str, OpSpec] = {}
        self.providers: dict[str, dict[str, Provider]] = {}
        self.priority: dict[str, list[str]] = {}
        self.pins: dict[str, str] = {}
        self.disabled: set[str] = set()
        self._cache: dict[Problem, Selection] = {}
        self._lock = threading.Lock()

    # -- declaration -------------------------------------------------------------------------
    def declare(self, spec: OpSpec) -> OpSpec:
        if spec.name in self.ops:
            raise ValueError(f"op {spec.name!r} declared twice")
        self.ops[spec.name] = spec
        self.providers[spec.name] = {REFERENCE: Provider(REFERENCE, spec.name, spec.reference)}
        return spec

    def register(self, provider: Provider) -> Provider:
        if provider.op not in self.ops:
            raise KeyError(f"provider {provider.name!r} registers for unknown op {provider.op!r}")
        self.providers[provider.op][provider.name] = provider
        self._cache.clear()
        return provider

    # -- configuration -----------------------------------------------------------------------
    def configure(self, priority: dict[str, list[str]] | None = None, pins: dict[str, str] | None = None,
                  disabled: list[str] | None = None) -> None:
        """Set per-op priority lists, pinned providers and disabled provider names."""
        for op, names in (priority or {}).items():
            self._check_op(op)
            self.priority[op] = list(names)
        for op, name in (pins or {}).items():
            self._check_op(op)
            if name not in self.providers[op]:
                raise AdmissionError(f"{op}: pinned provider {name!r} is not registered "
                                     f"(known: {', '.join(sorted(self.providers[op]))})")
            self.pins[op] = name
        self.disabled = set(disabled or ())
        self._cache.clear()

    def _check_op(self, op: str) -> None:
        if op not in self.ops:
            raise KeyError(f"unknown op {op!r} (known: {', '.join(sorted(self.ops))})")

    # -- selection ---------------------------------------------------------------------------
    def order(self, op: str) -> list[str]:
        names = [n for n in self.priority.get(op, []) if n in self.providers[op]]
        names += sorted(n for n in self.providers[op] if n not in names and n != REFERENCE)
        names = [n for n in names if n != REFERENCE] + [REFERENCE]
        return names

    def select(self, problem: Problem) -> Selection:
        sel = self._cache.get(problem)
        if sel is not None:
            return sel
        with self._lock:
            sel = self._select(problem)
            self._cache[problem] = sel
        return sel

    def _select(self, problem: Problem) -> Selection:
        self._check_op(problem.op)
        providers = self.providers[problem.op]
        refused: dict[str, list[str]] = {}
        pin = self.pins.get(problem.op)
        if pin is not None:
            reasons = providers[pin].refusal(problem)
            if reasons:
                raise AdmissionError(f"{problem.describe()}: pinned provider {pin!r} refused: "
                                     + "; ".join(reasons))
            others = {n: ["not tried: op pinned to " + pin] for n in providers if n != pin}
            return Selection(problem, providers[pin], others)
        chosen = None
        for name in self.order(problem.op):
            if name in self.disabled and name != REFERENCE:
                refused[name] = ["disabled by configuration"]
                continue
            if chosen is not None:
                refused[name] = [f"lower priority than {chosen.name}"]
                continue
            reasons = providers[name].refusal(problem)
            if reasons:
                refused[name] = reasons
            else:
                chosen = providers[name]
        assert chosen is not None, "the torch reference admits every problem"
        return Selection(problem, chosen, refused)

    def selections(self) -> list[Selection]:
        return list(self._cache.values())

    def clear_cache(self) -> None:
        self._cache.clear()


registry = KernelRegistry()
