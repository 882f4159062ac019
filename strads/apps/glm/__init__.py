"""Generalised linear models, min_w f(Xw) + lambda ||w||_1, by scheduled parallel
coordinate descent: what the Lasso (:mod:`strads.apps.lasso`) and sparse logistic
regression (:mod:`strads.apps.logreg`), two :class:`Datafit` s, share: set-up
(:mod:`.setup`), schedules (:mod:`.schedule`, :mod:`.split`), aggregate and worker
(:mod:`.aggregate`, :mod:`.update`), kernels (:mod:`.kernels`, :mod:`.groups`) and one
command line (:mod:`.cli`).
"""
from .setup import Datafit, default_gram_budget, gram_block_cap

__all__ = ["Datafit", "default_gram_budget", "gram_block_cap"]
