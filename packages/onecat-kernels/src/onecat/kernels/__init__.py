"""onecat.kernels: ops declared once with a torch reference, providers admitted per problem."""

from . import ops
from .attention_metadata import AttentionMetadata
from .registry import REFERENCE, AdmissionError, KernelRegistry, OpSpec, Problem, Provider, Selection, registry

__all__ = ["ops", "AttentionMetadata", "REFERENCE", "AdmissionError", "KernelRegistry", "OpSpec",
           "Problem", "Provider", "Selection", "registry"]
