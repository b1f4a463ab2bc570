"""Reward models put to use: best-of-N rankings of candidate image sequences and a reward callable
for a generator's RL loop.

``judgetrain score`` (``command``) ranks a manifest's candidates (``manifest``) with a trained
reward model, each shown as its training sequences were (``render``); in Python,
:class:`RewardModelScorer` (``scorer``) holds the loaded model and maps sequences to rewards, and
:func:`rank_sequences` ranks them within their groups. ``candidates`` writes a demo manifest.
Docs: "how-to/reward-models.md".
"""

from judgetrain.lazy import attach

__getattr__, __dir__, __all__ = attach(
    __name__,
    {
        "manifest": ["Candidate", "CandidateManifestError", "read_candidates"],
        "render": ["candidate_record", "candidate_records", "choose_layout", "trained_layouts"],
        "scorer": ["NotARewardModelError", "RankedCandidate", "RewardModelScorer", "rank_rewards", "rank_sequences"],
        "command": ["ScoreConfig", "ScoreOutError", "score"],
        "candidates": ["write_candidates"],
    },
)
