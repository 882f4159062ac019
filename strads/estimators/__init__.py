"""scikit-learn estimators on the strads engine: :class:`Lasso`,
:class:`SparseLogisticRegression`, :class:`MatrixFactorization` and :class:`LDA`.

Each ``fit`` validates its input with scikit-learn's helpers and then calls the app's own
``fit()`` (:func:`strads.apps.lasso.fit`, :func:`strads.apps.logreg.fit`,
:func:`strads.apps.mf.fit`, :func:`strads.apps.lda.fit`), which runs on
:func:`strads.run`: the same schedules, kernels and results as the command lines, in one
process (``n_jobs`` workers, each on a thread of its own) or under ``mpiexec``.

Under ``mpiexec -n N`` every rank runs the same script: rank 0 schedules, ranks 1..N-1
are the workers (``n_jobs`` is then ignored: there are N-1 workers). Every rank must call
``fit`` with the same arguments; the data is read on rank 0 only (the workers receive
their shards from it). When the run ends, rank 0 broadcasts the fitted attributes, so
``fit`` returns the same fitted estimator on every rank and the code after it
(``predict``, ``transform``, printing) runs unchanged everywhere; guard output that
should happen once with ``if MPI.COMM_WORLD.rank == 0``. An exception on any rank ends
the whole job (its traceback, then ``MPI_Abort``), as in :func:`strads.run`.

A fitted estimator's ``save(DIR)`` writes the folder a command line's ``--out`` writes;
:func:`load` reads either back (:mod:`strads.estimators._persist`); every estimator
pickles.

This package imports scikit-learn; ``import strads`` does not (``strads.Lasso`` and the
others are loaded on first use).
"""
from .glm import Lasso, LassoCV, SparseLogisticRegression, lasso_path
from .lda import LDA
from .mf import MatrixFactorization
from ._persist import load

__all__ = ["Lasso", "LassoCV", "lasso_path", "SparseLogisticRegression", "MatrixFactorization",
           "LDA", "load"]
