"""Generalised linear models, min_w f(Xw) + lambda ||w||_1, by scheduled parallel
coordinate descent: the machinery the Lasso (:mod:`strads.apps.lasso`) and sparse
logistic regression (:mod:`strads.apps.logreg`) share, written once.

* :mod:`.setup`: :class:`Datafit`, a loss as the rest needs it (its aggregate and worker
  classes, data readers, options, texts), and the set-up, fit and flag checks over it;
* :mod:`.schedule`: the schedules (working-set, priority with its dependency filter,
  round-robin, random; block halving and step relaxation);
* :mod:`.split`: a Jacobi schedule over several scheduler ranks (``--schedulers K``);
* :mod:`.aggregate`, :mod:`.update`: what the datafits' aggregates and workers share;
* :mod:`.kernels`: the shared numba kernels; :mod:`.cli`: the one command line.

A datafit is one module of its app: the Lasso's quadratic loss (exact block solves from
the block's Gram matrix, Gap Safe screening), the logistic loss (prox-Newton steps with
a line search, its dual's gap).
"""
from .setup import Datafit, default_gram_budget, gram_block_cap

__all__ = ["Datafit", "default_gram_budget", "gram_block_cap"]
