"""onecat.kernels: ops declared once with a torch reference, providers admitted per problem."""

from . import ops
from .attention_metadata import AttentionMetadata
from .registry import (REFERENCE, AdmissionError, Case, KernelRegistry, OpSpec, Problem, Provider, Selection,
                       format_admission, registry)
from .weights import GGUFWeight

__all__ = ["ops", "AttentionMetadata", "REFERENCE", "AdmissionError", "Case", "KernelRegistry", "OpSpec",
           "Problem", "Provider", "Selection", "format_admission", "registry", "GGUFWeight"]
