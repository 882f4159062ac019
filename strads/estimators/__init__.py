"""scikit-learn estimators on the strads engine: :class:`Lasso`,
:class:`SparseLogisticRegression`, :class:`MatrixFactorization` and :class:`LDA`.
Notes: docs/architecture.md."""
from .glm import (Lasso, LassoCV, SparseLogisticRegression, SparseLogisticRegressionCV,
                  lasso_path)
from .lda import LDA
from .mf import MatrixFactorization
from ._persist import load

__all__ = ["Lasso", "LassoCV", "lasso_path", "SparseLogisticRegression",
           "SparseLogisticRegressionCV", "MatrixFactorization", "LDA", "load"]
