"""onecat.spec: speculative decoding: proposers and lossless verification."""

from .ngram import NgramProposer
from .proposer import Proposal, Proposer
from .verifier import verify_greedy, verify_sampled

__all__ = ["NgramProposer", "Proposal", "Proposer", "verify_greedy", "verify_sampled"]
