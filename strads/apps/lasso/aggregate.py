"""The Lasso's aggregate: block solves, the duality gap, Gap Safe screening, the path.
Notes: docs/apps/lasso.md."""
import time

import numpy as np
import scipy.sparse as sp

from ..glm import kernels as GK
from ..glm.aggregate import GLMAggregate, _factor, _gram_sum, _sum
from . import kernels as K


class LassoAggregate(GLMAggregate):
    # setup() and the schedule (or begin(), from the workers' reports) set them again
    checkpoint_skip = GLMAggregate.checkpoint_skip + ("block_cap", "col_nnz")
    curv_bound = 1.0  # 1/2 ||r||^2's second derivative along x_j, per ||x_j||^2 (exact)

    @staticmethod
    def lambda_for(ratio, xty, n):
        """``ratio`` of lambda_max = ||X'y||_inf / n."""
        return ratio * float(np.abs(xty).max() / n)

    def complete(self, f, lam, lambda_ratio):
        """:meth:`later`'s set-up from worker 0's report: n, the column norms, X'y
        (lambda_max, when ``lam`` is None), y'y."""
        n = f["n"]
        if lam is None:
            lam = self.lambda_for(lambda_ratio, f["xty"], n)
        self.__init__(f["sq_norms"], n, lam, f["yy"], f.get("col_nnz"))

    y_mean = 0.0  # with an intercept: y's mean (setup sets it)
    x_mean = None  # with an intercept: X's column means (mu: sparse X's, centred implicitly)

    def __init__(self, sq_norms, n_samples, lam, y_sq, col_nnz=None, mu=None):
        self._init(n_samples, sq_norms, lam, 0.5 * float(y_sq) / n_samples)
        self.y_sq = float(y_sq)
        self.mu = mu  # sparse X with an intercept: its column means, centred implicitly
        self.col_nnz = col_nnz  # sparse X: each column's non-zeros (working-set pieces)
        self.screened = np.zeros(self.w.shape[0], dtype=np.bool_)  # proven 0 at the optimum
        self.block_cap = None  # working-set: the most coordinates of one Gram block
        self.pieces = 0  # block rounds that solved a piece of a working set cut to the cap
        self.late_rounds = 0  # block rounds dropped: a worker's Gram missed the deadline
        self.face = None  # dense X: the face's Cholesky factor, kept from block to block

    def full_task(self):
        """A full round: x_j' r for every coordinate not yet screened out."""
        if self.screened.any():
            cols = np.flatnonzero(~self.screened | (self.w != 0))
        else:
            cols = None
        return {"full": True, "cols": cols, "version": self.done}

    def block_task(self, cols, step):
        return {"cols": cols, "version": self.done, "step": step}

    def _round(self, round, task, partials):
        g = _sum(partials, "g")
        rss = sum(part["rss"] for part in partials)
        version = task["version"]
        primal = self._primal_at(version, 0.5 * rss / self.n)
        if "step" in task:  # a Jacobi round (priority: the workers' filter may choose it)
            cols = partials[0].get("cols", task["cols"])
            return self._checked_steps(task, partials, primal, g, self.sq_norms[cols])
        jacobi = self.anchor is not None  # (a Jacobi schedule's full round)
        if not jacobi:
            self._observe(primal, version)
        if task.get("full"):
            if self.mu is not None:  # sum(r) is 0 but for rounding: the centred x_j'r
                rs = sum(part["rs"] for part in partials)
                g -= rs * (self.mu if task["cols"] is None else self.mu[task["cols"]])
            if jacobi:  # it judges the steps before it, as a block round; after a
                # rejection (its gap: a point left) the next full round gives the gap
                cols = task["cols"] if task["cols"] is not None else \
                    np.arange(self.w.shape[0])
                if version < self.reject_at:
                    return None
                back = self._judge(primal, version, cols, g)
                if back is not None:
                    return back
            if task["cols"] is not None:  # screened coordinates: x_j' r not computed
                g_all = np.zeros(self.w.shape[0])
                g_all[task["cols"]] = g
                g = g_all
            self._full(g, rss, sum(part["ry"] for part in partials), version)
            if jacobi:  # (a path's next lambda: the anchor's objective at it)
                self.anchor = (version, self.primal) + self.anchor[2:]
            return None
        if not task.get("gram"):  # (working-set's empty rounds, while one is in flight)
            return self._steps(task, partials, g, self.sq_norms[task["cols"]])
        cols = task["cols"]
        before = np.count_nonzero(self.w[cols])
        if not all("G" in part or "Gi" in part or "Fp" in part for part in partials):
            self.late_rounds += 1  # the time limit passed while the workers built the Gram
            delta = np.zeros(cols.shape[0])
        elif task.get("path_gram"):
            delta = self._walk_gram(g, _gram_sum(partials, cols.shape[0]), rss)
        else:
            delta = self._exact(cols, g, partials, task.get("deadline"))
        if task.get("piece"):
            self.pieces += 1
        return self._moved(cols, before, delta, self.sq_norms[cols])

    def _exact(self, cols, g, partials, deadline=None):
        """Solve the block's subproblem from its Gram matrix, or the factor X_B the workers
        sent instead: updates inside the block see each other, so any block is safe."""
        old = self.w[cols]
        new = old.copy()
        # as skglm: to a fraction of the block's worst violation at the last full round;
        # a block of every moving coordinate to the run's tol on a dense path (warm
        # starts), or once the last block solve kept its support (the face found: else
        # the next full round finds new violators and a tight solve is wasted), or if
        # it holds every coordinate not screened out (none can join from outside)
        tol = 0.3 * np.sqrt(self.prio[cols].max())
        every = cols.shape[0] == np.count_nonzero(~self.screened | (self.w != 0))
        if (self.col_nnz is None or every if self.path is not None else
                self.run_tol > 0 and (self.settled or every)) and self._whole(cols):
            tol = min(tol, self._move_tol())
        tol = max(tol, 1e-14 * np.sqrt(self.y_sq))
        mu = NO_MU if self.mu is None else self.mu[cols]
        if "Fp" in partials[0]:  # (every worker sent its factor, or none did)
            ptr, rows, vals, h, n_rows = _factor(partials, cols.shape[0])[1:]
            G = (ptr, rows, vals, h - self.n * mu * mu if mu.shape[0] else h, n_rows)
        else:
            G = _gram_sum(partials, cols.shape[0])
            if mu.shape[0]:
                K.centre_gram(G, mu, float(self.n))
        passes = self._solve(G, g, new, tol, deadline=deadline, mu=mu, cols=cols)
        self.settled = bool(np.array_equal(old != 0, new != 0))
        self.w[cols] = new
        self.l1 += np.abs(new).sum() - np.abs(old).sum()
        self.updates += passes * cols.shape[0]
        return new - old

    def _walk_gram(self, q, G, rss):
        """A dense path's first round (:class:`GramPath`): the lambdas left solved here from
        the whole problem's Gram (:func:`kernels.gram_path`), each to the path's tol; at
        the last one, or one not solved, the rounds take over (one fit: its lambda, to the
        run's tol). Returns the change of w."""
        if self.mu is not None:
            K.centre_gram(G, self.mu, float(self.n))
            const = self.sq_norms == 0.0  # (constant columns: their centred 0s, as h's)
            G[const], G[:, const] = 0.0, 0.0
        path, m = self.path is not None, self.w.shape[0]
        k0 = self.path_k if path else 0
        lams = self.path[k0:] if path else np.array([self.lam])
        old, b = self.w.copy(), self.w.copy()
        W = np.empty((m, lams.shape[0]))
        gaps, passes = np.empty(lams.shape[0]), np.zeros(lams.shape[0], np.int64)
        solved = np.zeros(lams.shape[0], np.bool_)
        done = K.gram_path(G, GK.gram_c(G, q, b), q, b, float(rss), lams, float(self.n),
                           self.path_tol if path else self.run_tol,
                           self.gap_ref if self.gap_null else 0.0,
                           self.path_cap if path else MAX_PASSES, W, gaps, passes, solved,
                           np.empty(m), np.empty(m), np.empty((m, m)),
                           np.empty(m, np.int64), np.zeros(m, np.bool_), np.empty(m))
        if path:
            k = k0 + min(done, lams.shape[0] - 1)  # (the last: checked by the next round)
            self.path_w[:, k0:k], self.path_gap[k0:k] = W[:, :k - k0], gaps[:k - k0]
            self.path_solved[k0:k] = True
            self.path_k, self.path_begun = k, self.done
            self.lam = float(self.path[k])
            self.thresh = self.n * self.lam
        self.w[:] = b
        self.l1 = float(np.abs(b).sum())
        self.updates += int(passes.sum()) * m
        self.gap = np.inf  # (until the full round's)
        return b - old

    def _whole(self, cols):
        """Whether the block holds the support and every coordinate of positive priority
        (a full round's): the whole problem but for coordinates at their optimum."""
        moving = (self.w != 0) | (self.prio > 0)
        return np.count_nonzero(moving[cols]) == np.count_nonzero(moving)

    def _move_tol(self):
        """The block moves |x_j| |d_j| under which the gap is about the tol (its
        bound 2 |x|_max delta ||w||_1 / n + eps^2 ||r||^2 / (2n), eps = |x|_max delta /
        (n lambda), each term held to half of tol P)."""
        tol = self.path_tol if self.path is not None else self.run_tol
        target = 0.5 * tol * self.gap_ref
        x_max = float(self.norms.max())
        rr = 2 * self.n * (self.primal - self.lam * self.l1)  # ||r||^2
        a = target * self.n / (2 * x_max * self.l1) if self.l1 > 0 else np.inf
        b = self.thresh * np.sqrt(2 * self.n * target / rr) / x_max if rr > 0 else np.inf
        return min(a, b)

    def _solve(self, G, q, b, tol, max_passes=None, deadline=None, mu=None, cols=None):
        """Coordinate descent on the block from a dense Gram ``G`` or a factor ``(ptr, rows,
        vals, h, n_rows)`` in pieces of about SOLVE_OPS multiply-adds (one without a
        ``deadline``; the same arithmetic): past the deadline it returns the iterate it
        has. ``mu``: the block's column means, for the factor's centring."""
        m = b.shape[0]
        mu = NO_MU if mu is None else mu
        max_passes = max_passes or MAX_PASSES
        hist = np.empty((6, m))
        state = np.zeros(1, dtype=np.int64)
        passes = 0
        if not isinstance(G, np.ndarray) and cols is not None and m <= (self.block_cap or 0):
            # CD on the factor crawls where the face is ill-conditioned (near
            # interpolation): once its passes cost what the dense solve would (its Gram's
            # passes, the face factor's new rows), that solve and its Newton steps on the
            # face go on from where it is (as renting skis: at most twice the better cost)
            ptr, rows, vals, h, n_rows = G
            b0 = b.copy()
            a = float(min(np.count_nonzero(b), self.n))  # (the face's rows, about)
            kept = float(self.face[2]) if self.face is not None else 0.0
            face = max(a ** 3 - kept ** 3, 0.0) / 6  # (a row: a triangular solve)
            switch = int(max(1, min(max_passes, (DENSE_PASSES * m * m + face) /
                                    (2.0 * vals.shape[0] + m))))
            passes = self._solve(G, q, b, tol, switch, deadline, mu)
            if passes >= switch and passes < max_passes:
                F = sp.csc_matrix((vals, rows, ptr), shape=(n_rows, m))
                G = (F.T @ F).toarray()
                if mu.shape[0]:
                    K.centre_gram(G, mu, float(self.n))
                q = -GK.gram_c(G, -GK.gram_c(G, q, b0), b)  # (numba's sums: as MPI's)
            else:
                return passes
        if isinstance(G, np.ndarray):
            c = GK.gram_c(G, q, b)
            cost = m * m
            L, order, inf, fstate, x = self._face_enter(cols if passes or self.col_nnz is None
                                                        else None, m)

            def run(k):
                return K.cd_dense_solved(G, q, b, c, self.thresh, tol, k, hist, state, L,
                                         order, inf, fstate, np.empty(m), np.empty(m), x)
        else:
            ptr, rows, vals, h, n_rows = G
            b0, u = b.copy(), np.zeros(n_rows)
            cost = 2 * vals.shape[0] + m

            def run(k):
                return K.cd_factor_solved(ptr, rows, vals, h, q, b, self.thresh, tol, k,
                                          b0, u, hist, state, mu, float(self.n))
        per_call = max_passes if deadline is None else \
            int(max(1, min(max_passes, SOLVE_OPS // max(cost, 1))))
        while passes < max_passes:
            k, converged = run(min(per_call, max_passes - passes))
            passes += k
            if converged or (deadline is not None and time.time() >= deadline):
                break
        if isinstance(G, np.ndarray) and L.shape[0]:
            self.face[1][:fstate[0]] = cols[order[:fstate[0]]]
            self.face[2] = int(fstate[0])
        return passes

    def _face_enter(self, cols, m):
        """Dense X (or sparse X's block gone dense, :meth:`_solve`): the face factor kept
        (its rows: at most the rank, n - 1 with an intercept; room for the largest block
        so far, a face being in its block) made local to the block ``cols``
        (:func:`kernels.face_enter`); else an empty one (no Newton steps)."""
        icpt = self.x_mean is not None or self.mu is not None
        rows = min(self.n - icpt, self.w.shape[0], m)
        if cols is None or rows <= 0:
            return np.empty((0, 0)), NO_INT, np.zeros(m, np.bool_), np.zeros(1, np.int64), \
                np.empty(m)
        if self.face is None or self.face[0].shape[0] < rows:
            L, order, a = np.zeros((rows, rows)), np.zeros(rows, np.int64), 0
            if self.face is not None:
                L0, order0, a = self.face
                L[:a, :a], order[:a] = L0[:a, :a], order0[:a]
            self.face = [L, order, a]
        L, gorder, a = self.face
        order, inf, x = np.empty(L.shape[0], np.int64), np.zeros(m + 1, np.bool_), \
            np.empty(max(m, L.shape[0]))
        fstate = np.array([K.face_enter(L, gorder, a, cols, order, inf, x)])
        return L, order, inf, fstate, x

    def _full(self, g, rss, ry, version):
        """Duality gap at this version (screened coordinates' g is 0: the restricted
        problem's gap is a valid certificate), Gap Safe screening, every priority; on a
        path, the next lambdas while this one's gap meets the tol."""
        complete = not self.screened.any()  # g is x_j' r for every j
        scale = self._gap(g, rss, ry)
        while self.path is not None and self._next_lambda():
            if not complete:  # (the screened g are 0: the next full round's gap)
                self.gap = np.inf
                break
            self.primal = self._primal_at(version, 0.5 * rss / self.n)
            scale = self._gap(g, rss, ry)
        # Gap Safe rule (Fercoq et al. 2015): b*_j = 0 if |x_j' theta| + |x_j| R < 1, with
        # R = sqrt(2 n gap) / (n lambda) the radius of a ball that holds the dual optimum.
        radius = np.sqrt(2 * self.n * self.gap) / self.thresh if self.thresh > 0 else np.inf
        GK.priorities(self.w, g, self.sq_norms, self.thresh, self.prio)
        K.gap_safe(self.w, g, self.norms, scale, radius, self.screened, self.prio)
        self.fulls += 1
        self._tree = None

    def _gap(self, g, rss, ry):
        """The duality gap at the dual point r / scale; returns the scale. At lambda 0
        (least squares: no dual point but at the optimum) the first-order condition, as
        scikit-learn's, scale-free: sum_j (x_j' r)^2 / (2 n ||x_j||^2), the gap of
        orthogonal columns."""
        if self.thresh == 0:
            some = self.sq_norms > 0
            self.gap = float(np.sum(g[some] ** 2 / self.sq_norms[some])) / (2 * self.n)
            return 1.0
        g_max = float(np.abs(g).max())
        scale = max(self.thresh, g_max) or 1.0  # theta = r / scale is dual feasible
        # lambda / scale, which neither lambda^2 nor n lambda may overflow into
        t = min(1.0 / self.n, self.lam / g_max) if g_max > 0 else 1.0 / self.n
        dual = t * ry - 0.5 * self.n * t * t * rss
        self.gap = max(self.primal - dual, 0.0)
        return scale

    run_tol = 0.0  # the run's tol (the engine's, told here)
    settled = False  # the last block solve left its support as it was
    gap_null = False  # the gap's reference: the null model's objective, not the objective

    @property
    def gap_ref(self):
        """What ``tol`` scales: the objective, or (``gap_null``) the null model's,
        y'y / 2n (y centred with an intercept), as scikit-learn's Lasso."""
        return 0.5 * self.y_sq / self.n if self.gap_null else self.primal

    def converged(self, tol):
        """The duality gap at most ``tol`` times :attr:`gap_ref`, or within the rounding of
        the sums it is computed from (a share GAP_RESOLUTION of y'y / 2n, the objective
        at 0): an objective near 0 (a fit that interpolates) asks for less than that."""
        self.run_tol = tol
        return tol > 0 and self.gap <= max(tol * self.gap_ref,
                                           GAP_RESOLUTION * 0.5 * self.y_sq / self.n)

    path = None  # the lambdas of a regularisation path (walk_path)

    def walk_path(self, lams, tol, rounds):
        """Solve for each of ``lams`` (decreasing, the first is ``lam``) in this run: at a
        full round whose gap meets ``tol``, or ``rounds`` rounds on, the next lambda
        starts from this one's coefficients."""
        self.path = np.asarray(lams, dtype=np.float64)
        self.path_tol, self.path_cap = float(tol), int(rounds)
        self.path_k = self.path_begun = 0  # the lambda solved now, the round it began
        self.path_w = np.zeros((self.w.shape[0], self.path.shape[0]))
        self.path_gap = np.full(self.path.shape[0], np.inf)
        self.path_rounds = np.zeros(self.path.shape[0], np.int64)
        self.path_solved = np.zeros(self.path.shape[0], np.bool_)  # to tol

    def _keep(self, k):
        self.path_w[:, k], self.path_gap[k] = self.w, self.gap
        self.path_rounds[k] = self.done - self.path_begun
        self.path_solved[k] = self.converged(self.path_tol)

    def _next_lambda(self):
        """At a full round: keep this lambda's solution and go on to the next one, if it
        is solved (or out of rounds) and not the last; False if not."""
        k = self.path_k
        if k + 1 == self.path.shape[0] or (not self.converged(self.path_tol) and
                                           self.done - self.path_begun < self.path_cap):
            return False
        self._keep(k)
        self.path_k, self.path_begun = k + 1, self.done
        self.lam = float(self.path[k + 1])
        self.thresh = self.n * self.lam
        self.screened[:] = False  # (proven at the larger lambda only)
        return True

    def load_state(self, state):
        super().load_state(state)
        if self.face is None:
            return
        face = self.face  # (a checkpoint's: its shapes and rows checked before a kernel)
        ok = isinstance(face, list) and len(face) == 3 and type(face[2]) is int and all(
            isinstance(x, np.ndarray) for x in face[:2])
        L, order, a = face if ok else (None, None, 0)
        r = L.shape[0] if ok and L.ndim == 2 else 0
        if not (ok and L.dtype == np.float64 and L.shape == (r, r) and 0 < r <= min(
                self.n, self.w.shape[0]) and order.dtype == np.int64 and order.shape == (r,)
                and 0 <= a <= r and np.isfinite(L[:a, :a]).all()
                and np.unique(order[:a]).shape[0] == a
                and ((order[:a] >= 0) & (order[:a] < self.w.shape[0])).all()):
            raise ValueError("face: not a factor of this run's columns")

    def finish(self, collected):
        # the objective at the final model (a run stopped by a limit ends past the round
        # it last scored), from the workers' exact residuals
        model = self._model(0.5 * sum(float(c["rss"]) for c in collected))
        if self.x_mean is not None:
            model["intercept"] = np.float64(self.y_mean - self.x_mean @ self.w)
        if self.path is not None:  # (a run stopped short: the lambdas left get this w)
            k = self.path_k
            self._keep(k)
            self.path_w[:, k + 1:] = self.w[:, None]
            coef = self.path_w
            if self.kept is not None:
                coef = np.zeros((self.n_features, coef.shape[1]))
                coef[self.kept] = self.path_w
            model.update(path_lambda=self.path, path_coef=coef, path_gap=self.path_gap,
                         path_rounds=self.path_rounds, path_solved=self.path_solved)
            if self.x_mean is not None:
                model["path_intercept"] = self.y_mean - self.x_mean @ self.path_w
        return model

    def summary(self):
        empty = 0 if self.kept is None else self.n_features - self.kept.shape[0]
        s = {"lambda": self.lam, "nnz_coef": self.nnz,
             "screened": int(self.screened.sum()) + empty,
             "duality_gap": self.gap, "objective_rises": self.objective_rises,
             "grouped_updates": self.grouped}
        if self.block_cap is not None:
            s.update(gram_block_cap=self.block_cap, gram_pieces=self.pieces,
                     late_rounds=self.late_rounds)
        return s


DENSE_PASSES = 30  # a dense block solve's passes, with Newton steps on the face (about)
MAX_PASSES = 100_000  # passes of a block solve, at most
GAP_RESOLUTION = 1e-14  # (about 45 float64 epsilons: the block solves' floor too)
NO_MU = np.empty(0)  # (no centring)
NO_INT = np.empty(0, np.int64)
SOLVE_OPS = 20_000_000  # multiply-adds of a block solve between two looks at the clock
