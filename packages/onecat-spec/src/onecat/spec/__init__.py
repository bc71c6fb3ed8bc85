"""onecat.spec: speculative decoding: proposers and lossless verification."""

from .ngram import NgramProposer
from .proposer import Proposal, Proposer, ProposeRequest
from .verifier import verify_greedy, verify_sampled

__all__ = ["NgramProposer", "Proposal", "ProposeRequest", "Proposer", "verify_greedy", "verify_sampled"]
