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

import contextlib
import os
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
    takes_x_stages: bool = False  # fn takes x as x_stages.XStages (ops._dispatch gives any other provider a tensor)

    def refusal(self, problem: Problem, check_available: bool = True) -> list[str]:
        reasons = list(self.available()) if check_available else []
        if not reasons:
            reasons = list(self.supports(problem))
        return reasons


@dataclass
class Case:
    """One generated call of an op: `reference(*args, **kwargs)`."""

    label: str
    args: tuple
    kwargs: dict = field(default_factory=dict)


@dataclass
class OpSpec:
    """An op: its reference, and what a generic test needs to check any provider against it.

    make_inputs(dtype, device, generator) -> list[Case]; tolerances: dtype name -> bound on
    ||out - ref|| / ||ref|| per output; outputs(case, result) -> the tensors to compare (default:
    the result, or each element of a returned tuple; in-place ops name their written arguments).
    """

    name: str
    reference: Callable[..., Any]
    doc: str = ""
    make_inputs: Callable[..., Any] | None = None
    tolerances: dict[str, float] = field(default_factory=dict)
    outputs: Callable[[Case, Any], list[Any]] | None = None

    def tensors_out(self, case: Case, result: Any) -> list[Any]:
        if self.outputs is not None:
            return list(self.outputs(case, result))
        return list(result) if isinstance(result, (tuple, list)) else [result]


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


# comma list of provider names refused on every problem, or `op:provider` refused on that op's only
DISABLED_ENV = "ONECAT_DISABLED_PROVIDERS"


def _env_disabled() -> set[str]:
    return {n.strip() for n in os.environ.get(DISABLED_ENV, "").split(",") if n.strip()}


class KernelRegistry:
    def __init__(self) -> None:
        self.ops: dict[str, OpSpec] = {}
        self.providers: dict[str, dict[str, Provider]] = {}
        self.priority: dict[str, list[str]] = {}
        self.pins: dict[str, str] = {}
        self.disabled: set[str] = set()
        self._cache: dict[Problem, Selection] = {}
        self._keyed: dict[tuple, Selection] = {}  # select_keyed's: call-shape key -> the same Selection
        self._lock = threading.Lock()
        self._recording: list[list[Selection]] = []  # open recording() blocks

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
        self.clear_cache()
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
        self.clear_cache()

    def is_disabled(self, name: str, op: str | None = None) -> bool:
        """Disabled by configure() or by the environment ($ONECAT_DISABLED_PROVIDERS, read when a
        problem is first selected: a provider found wrong on some machine is switched off without
        a code or config change, e.g. in a benchmark's child processes). Either list names a provider
        everywhere, or `op:provider` for one op (an A/B of one fusion whose provider serves other ops)."""
        return self._disabled_by(name, op) is not None

    def _disabled_by(self, name: str, op: str | None) -> str | None:
        """Why `name` (on `op`) is refused before being asked, or None: configuration, then environment."""
        if name == REFERENCE:
            return None
        keys = {name} | ({f"{op}:{name}"} if op is not None else set())
        if keys & self.disabled:
            return "disabled by configuration"
        return f"disabled by ${DISABLED_ENV}" if keys & _env_disabled() else None

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
        if sel is None:
            with self._lock:
                sel = self._select(problem)
                self._cache[problem] = sel
        for used in self._recording:
            used.append(sel)
        return sel

    def select_keyed(self, key: tuple, make_problem: Callable[[], Problem]) -> Selection:
        """select(make_problem()), cached under `key`: a tuple the caller derives from the same facts
        as the Problem (ops._dispatch: op, device, dtype, capture flag, the params as given), so a
        call shape seen before skips building, sorting and hashing its Problem (the per-call host
        cost of eager prefill). Recordings see every selection, as with select()."""
        sel = self._keyed.get(key)
        if sel is None:
            sel = self.select(make_problem())
            with self._lock:
                self._keyed[key] = sel
            return sel
        for used in self._recording:
            used.append(sel)
        return sel

    @contextlib.contextmanager
    def recording(self):
        """Yields the list of every selection made inside the block, cached or not: what one piece of
        work (a CUDA-graph capture) used, where selections() holds everything the process selected
        (other models, earlier tests)."""
        used: list[Selection] = []
        self._recording.append(used)
        try:
            yield used
        finally:
            self._recording.remove(used)

    def explain(self, problem: Problem, check_available: bool = True) -> Selection:
        """The selection for `problem`, uncached; with check_available=False providers are judged
        by `supports` alone (what would be admitted on that device, seen from another machine)."""
        return self._select(problem, check_available)

    def _select(self, problem: Problem, check_available: bool = True) -> Selection:
        self._check_op(problem.op)
        providers = self.providers[problem.op]
        refused: dict[str, list[str]] = {}
        pin = self.pins.get(problem.op)
        if pin is not None:
            reasons = providers[pin].refusal(problem, check_available)
            if reasons:
                raise AdmissionError(f"{problem.describe()}: pinned provider {pin!r} refused: "
                                     + "; ".join(reasons))
            others = {n: ["not tried: op pinned to " + pin] for n in providers if n != pin}
            return Selection(problem, providers[pin], others)
        chosen = None
        for name in self.order(problem.op):
            why = self._disabled_by(name, problem.op)
            if why:
                refused[name] = [why]
                continue
            if chosen is not None:
                refused[name] = [f"lower priority than {chosen.name}"]
                continue
            reasons = providers[name].refusal(problem, check_available)
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
        self._keyed.clear()


def format_admission(selections: list[Selection]) -> str:
    """A plain-text admission table: per problem (op and its facts), the admitted provider, then
    each refused one with its reasons."""
    names = [n for sel in selections for n in [sel.provider.name, *sel.refused]]
    w = max([len(n) for n in names] + [8])
    lines = [f"{'op [device, dtype, facts]':<{w + 4}}", f"    {'provider':<{w}}  {'status':<8}  reasons", "-" * 72]
    for sel in selections:
        lines.append(sel.problem.describe())
        lines.append(f"    {sel.provider.name:<{w}}  ADMITTED")
        for name, reasons in sel.refused.items():
            lines.append(f"    {name:<{w}}  refused   {'; '.join(reasons)}")
    return "\n".join(line.rstrip() for line in lines)


registry = KernelRegistry()
