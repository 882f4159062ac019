"""The latent Dirichlet allocation estimator (:class:`LDA`)."""
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                          _fit_context)
from sklearn.utils._param_validation import Interval, validate_params
from sklearn.utils.validation import check_is_fitted, check_non_negative, validate_data

from ..apps import lda
from ..apps.lda import foldin
from ..params import sklearn_constraints
from ._base import Count, N_JOBS, RANDOM_STATE, _Checked, _collective, collective, _n_workers, _seed
from ._persist import Persistent, _set


class LDA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, Persistent, _Checked,
          BaseEstimator):
    """Latent Dirichlet allocation by model-parallel collapsed Gibbs sampling (the strads
    LDA app); its parameters and attributes: docs/apps/lda.md, "Estimator reference"."""

    def __init__(self, n_components=10, doc_topic_prior=None, topic_word_prior=None,
                 max_iter=50, random_state=None, n_jobs=None, max_doc_update_iter=100):
        self._set_params(locals())

    # the app's declarations, under the estimator's names (None: the app's default prior)
    _parameter_constraints = {
        **sklearn_constraints(lda.PARAMS, dict(
            n_components="n_topics", doc_topic_prior="alpha", topic_word_prior="beta",
            max_iter="sweeps"), doc_topic_prior=dict(none=True),
            topic_word_prior=dict(none=True), max_iter=dict(low=1)),
        "random_state": RANDOM_STATE, "n_jobs": N_JOBS,
        "max_doc_update_iter": [Interval(Integral, 0, None, closed="left")]}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.input_tags.positive_only = True
        tags.transformer_tags.preserves_dtype = ["float64"]
        return tags

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    def _counts(self, X, reset, whom):
        """Validated document-term counts as an int64 CSR matrix (canonical)."""
        X = validate_data(self, X, accept_sparse="csr", dtype=None, reset=reset)
        if X.dtype.kind not in "iuf":
            X = X.astype(np.float64)
        check_non_negative(X, whom)
        vals = X.data if sp.issparse(X) else X
        if vals.dtype.kind == "f" and (vals != np.round(vals)).any():
            raise ValueError(f"{whom}: X must hold integer counts")
        X = sp.csr_matrix(X, dtype=np.int64, copy=True)  # never the caller's arrays
        X.sum_duplicates()
        X.eliminate_zeros()
        return X

    @collective
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the topics to document-term counts X (non-negative integers); -> self, on
        every rank under ``mpiexec``."""
        X = self._counts(X, True, "LDA.fit")
        alpha = 0.1 if self.doc_topic_prior is None else self.doc_topic_prior
        beta = 0.01 if self.topic_word_prior is None else self.topic_word_prior
        seed = _seed(self.random_state)
        kw = dict(n_topics=int(self.n_components), alpha=float(alpha), beta=float(beta),
                  sweeps=int(self.max_iter), seed=seed, quiet=True,
                  workers=_n_workers(self.n_jobs, X.shape[0], X.shape[1]))

        def fitted(res):
            M = res.model
            return {"components_": M["word_topic"].T.astype(np.float64) + beta,
                    "doc_topic_": self._mixtures(M["doc_topic"], alpha),
                    "doc_topic_prior_": float(alpha), "topic_word_prior_": float(beta),
                    "n_iter_": int(self.max_iter), "loglik_": float(M["loglik"]),
                    "_transform_seed": self._fold_seed(seed)}

        return _set(self, _collective(lda.fit, (X,), kw, fitted))

    @staticmethod
    def _mixtures(ndk, alpha):
        """The documents' topic mixtures (rows sum to 1) from their topic counts."""
        ndk = ndk.astype(np.float64)
        return (ndk + alpha) / (ndk.sum(axis=1, keepdims=True) + ndk.shape[1] * alpha)

    @staticmethod
    def _fold_seed(seed):
        """The fold-in's seed: transform() is deterministic for a fitted model."""
        return int(np.random.default_rng([seed, 0x666F6C64]).integers(0, 2 ** 62))

    def fit_transform(self, X, y=None):
        """Fit, and return the training documents' topic mixtures (``doc_topic_``, from
        the chain itself rather than a fold-in; rows sum to 1)."""
        return self.fit(X).doc_topic_.copy()

    def transform(self, X):
        """Topic mixtures (n_documents, n_components) of documents (counts over the
        training vocabulary) by collapsed Gibbs fold-in against the fitted topics, held
        fixed (:func:`strads.apps.lda.foldin.fold_in`): ``(mean n_dk + alpha) / (n_d + K
        alpha)`` over the sweeps after burn-in; rows sum to 1 (an empty document: 1/K
        each); the same for the same fitted model and X."""
        return self._fold_in(X, "LDA.transform")[1]

    def _fold_in(self, X, whom):
        """``(X, theta, phi, tokens)``: X checked, its mixtures, the topics, its tokens."""
        check_is_fitted(self, "components_")
        X = self._counts(X, False, whom)
        doc_ptr, words = foldin.tokens(X)
        # phi[w, k] = p(w | k), word-major (the fold-in kernel's layout)
        phi = np.ascontiguousarray((self.components_
                                    / self.components_.sum(axis=1, keepdims=True)).T)
        theta = foldin.fold_in_threads(doc_ptr, words, phi, float(self.doc_topic_prior_),
                                       int(self.max_doc_update_iter), self._transform_seed,
                                       _n_workers(self.n_jobs, max(X.shape[0], 1)))
        return X, theta, phi, int(doc_ptr[-1])

    def _loglik(self, X):
        X, theta, phi, n_tokens = self._fold_in(X, "LDA.score")
        ll = foldin.doc_loglik(X.indptr.astype(np.int64), X.indices.astype(np.int64),
                               X.data.astype(np.float64), theta, phi)
        return float(ll.sum()), n_tokens

    def score(self, X, y=None):
        """Approximate log-likelihood (natural log) of documents: ``sum_d sum_w c_dw
        log(theta_d . phi_w)``, with the fitted topics ``phi`` and each document's mixture
        ``theta_d`` from :meth:`transform`. Since theta_d is estimated from the same
        document, this plug-in value is higher than the exact marginal log p(w_d); use it
        to compare models on held-out documents."""
        return self._loglik(X)[0]

    def perplexity(self, X):
        """``exp(-score(X) / number of tokens in X)`` (X: at least one token)."""
        ll, n_tokens = self._loglik(X)
        if n_tokens == 0:
            raise ValueError("perplexity needs documents with at least one token")
        return float(np.exp(-ll / n_tokens))

    @validate_params({"n": [Count(Integral, 1, None, closed="left")]},
                     prefer_skip_nested_validation=True)
    def top_words(self, vocab=None, n=10):
        """The ``n`` most probable words of every topic (a list per topic, most probable
        first). ``vocab``: the word of every column of X; None: ``vocab_`` if the model
        has one, else word ids (as strings)."""
        check_is_fitted(self, "components_")
        vocab = getattr(self, "vocab_", None) if vocab is None else vocab
        if vocab is not None and len(vocab) != self.components_.shape[1]:
            raise ValueError(f"{len(vocab)} vocabulary words for "
                             f"{self.components_.shape[1]} features")
        return lda.top_words(self.components_.T, vocab, n)
