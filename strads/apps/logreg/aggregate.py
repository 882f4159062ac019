"""Sparse logistic regression on the scheduler rank: the working set's prox-Newton steps
and line search, the Jacobi Newton steps, the duality gap (the logistic dual at the
rescaled point, and at celer's extrapolated one; with ``gap_ref="null"`` against the null
model's objective, :func:`null_loss`). Notes: docs/apps/logreg.md.
"""
import math

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp

from ..glm import kernels as GK
from ..glm.aggregate import GLMAggregate, _factor, _gram_sum, _stack, _sum
from ..glm.schedule import working_set
from . import kernels as K
from .checks import check_kept
from .update import ACCEL

EPS_TOL = 0.3  # a working set is solved to 0.3 of the worst violation (as skglm)
ARMIJO = 1e-4  # sufficient decrease of the line search
BACKOFF = 0.5 ** np.arange(1, 21)  # the line search's steps after t = 1 failed
MAX_PN = 50  # prox-Newton steps on one working set, at most
MAX_CD = 50  # coordinate-descent passes of one subproblem, at most (an inexact direction)
VIOL_CAP = 4  # violators fill a working set to 4x the support's rule, at most
MAX_STALLS = 5  # outer iterations in a row without a decrease end the run
POLISH_IT = 2 * MAX_CD  # CG products of one face solve, at most (each costs a CD pass)
POLISH_AFTER = 2  # a working set's prox-Newton steps before CD's unsolved ones go to it
POLISH_STEPS = 5  # active-set steps of a face solve, at most (each drops a coefficient)
FACTOR_STEPS = 20  # the same from a Cholesky factor (each costs a triangular solve)
LAPACK_SPEEDUP = 30  # a dense factor's flops against the factor's scattered ones (per second)
ROUND_OPS = 100_000  # multiply-adds that cost about what a round does in itself


class LogRegAggregate(GLMAggregate):
    curv_bound = 0.25  # the logistic loss's second derivative, at most (Jacobi steps)
    floor = False  # a fresh Gram's step overshot: the next Grams are floored (_choose_ws)
    # setup() (or begin(), from the workers' reports) sets them again
    checkpoint_skip = GLMAggregate.checkpoint_skip + ("tol", "block_cap", "min_size",
                                                      "reuse", "col_share", "x_nnz", "p")
    # X's non-zeros by column, as shares, and in all (the datafit sets them; None: not known)
    col_share = x_nnz = None
    check_loaded = check_kept  # (its working set, planned block and kept Gram)

    @staticmethod
    def lambda_for(ratio, xty, n):
        """``ratio`` of lambda_max = ||X'y||_inf / (2n), y in {-1, +1}."""
        return ratio * float(np.abs(xty).max()) / (2 * n)

    def complete(self, f, lam, lambda_ratio, tol, gap_ref="objective", **kw):
        """:meth:`later`'s set-up from worker 0's report: n, the column norms, q0 = X'y
        (lambda_max, when ``lam`` is None; with an intercept, the labels' sum: q0's last
        entry over the constant column's value), the two labels."""
        n, sq, icpt = f["n"], f["sq_norms"], kw.get("intercept", False)
        if lam is None:
            lam = self.lambda_for(lambda_ratio, f["q0"], n)
        y_sum = float(f["q0"][-1]) / math.sqrt(sq[-1] / n) if icpt else 0.0
        self.__init__(n, sq, lam, tol, **kw,
                      null=null_loss(n, y_sum, icpt) if gap_ref == "null" else None)
        self.classes = f["classes"]

    def __init__(self, n_samples, sq_norms, lam, tol, min_size=32, block_cap=None,
                 reuse=True, intercept=False, null=None):
        self._init(n_samples, sq_norms, lam, math.log(2.0))  # (at w = 0)
        self.p, self.tol = self.w.shape[0], float(tol)
        self.null = null  # the gap's reference if not the objective (gap_ref "null")
        self.stopped = False  # the gap certified the model: later updates are dropped
        # the dual scale of the last full round (dual_round, its objective dual_primal)
        self.dual_c, self.dual_round, self.duals, self.dual_primal = None, None, 0, math.nan
        # the extrapolated dual point's (weights, scale), or None; the last full rounds' q
        self.dual_acc, self.q_hist = None, []
        self.accel_used = 0  # gaps the extrapolated point made smaller
        # working set
        self.min_size, self.block_cap, self.reuse = int(min_size), block_cap, bool(reuse)
        self.intercept = bool(intercept)  # the last column is an intercept's (eliminated)
        self.plans = 0  # tasks planned so far: the schedule takes each once (by number)
        self.next, self.ws = {"kind": "full"}, np.empty(0, np.int64)
        self.G = None  # the block's Gram, kept for the next steps on the same block
        self.d = None  # the pending direction on the block
        self.delta = 0.0  # its predicted decrease g'd + lambda (|w + d| - |w|)
        self.curv = 0.0  # its curvature term d'Gd / 2n (the model: delta + curv)
        self.model_ok = False  # the last step's change was the model's: no fresh Gram next
        self.kept_steps = 0  # steps whose trial built no fresh Gram (model_ok)
        self.fresh = False  # the direction comes from a Gram computed at this point
        self.tol_in, self.ws_steps, self.last_in = 0.0, 0, math.inf  # (as _choose_ws sets them)
        self.newton_steps = self.gram_rounds = self.backtracks = 0
        self.cd_passes = 0  # (with the face solves' CG products: each costs a pass)
        self.polished = 0  # subproblems CD left unsolved, solved on their face (_polish)
        self.stalled = False  # a working set has used up its MAX_PN steps: polish from now
        self.slow = False  # a step from a kept Gram cut the violation by under half
        self.G_cols = None  # the block the kept Gram belongs to
        self.reused = 0  # working sets started from the kept Gram
        self.extended = 0  # of which the Gram was extended by new columns
        self.q_ws = None  # the full round's q on the block being extended
        self.held = None  # a full round's (violations, q) while its gap is computed
        self.classes = None  # the two original labels (setup sets them)
        self.last_primal = math.inf  # at the last full round
        self.stalls = 0  # full rounds in a row with no decrease
        self.best_viol = math.inf  # the lowest worst violation of a full round
        self.exhausted = False  # nothing more to gain: the schedule ends the run
        self.icpt_moved = 0  # Jacobi: the round that last moved the intercept (_steps)

    def converged(self, tol):
        self.tol = float(tol)
        return self.stopped

    @property
    def next(self):
        """The working set's next task: plan number ``plans``."""
        return self._next

    @next.setter
    def next(self, task):
        if (task["kind"] == "newton" or task.get("gram")) and self.floor:
            task["floor"] = True  # (a trial's Gram too: each of its steps is a Newton step)
        self._next, self.plans = task, self.plans + 1

    # -- rounds --------------------------------------------------------------------------
    def full_task(self):
        """A Jacobi schedule's full round: q and the diagonal Hessian sums h."""
        return {"kind": "full", "hess": True, "version": self.done, "icpt": self.intercept}

    def block_task(self, cols, step):
        return {"kind": "block", "cols": cols, "version": self.done, "step": step,
                "icpt": self.intercept}

    def _round(self, round, task, partials):
        if self.stopped:
            return None
        if "dual" in task:
            ent = sum(p["ent"] for p in partials)
            if "accel" in task:  # (NaN from a worker whose rows left [0, 1])
                acc = sum(p["ent_acc"] for p in partials)
                if acc > ent:
                    ent = acc
                    self.accel_used += 1
            self.gap = max(self.dual_primal - ent / self.n, 0.0)
            ref = self.dual_primal if self.null is None else self.null
            if self.tol > 0 and self.gap <= self.tol * ref:
                self.stopped = True
                return None
        step = {"block": self._jacobi, "full": lambda t, p: self._full(round, t, p),
                "newton": self._newton, "trial": lambda t, p: self._trial(round, t, p),
                "extend": self._extend,
                "certify": lambda t, p: self._choose_ws(*self.held)}  # (not certified)
        return step[task["kind"]](task, partials) if task["kind"] in step else None  # (wait)

    def _full(self, round, task, partials):
        """A full round's q and loss (or a trial's at t = 1, its step committed)."""
        q, loss = _sum(partials, "q"), sum(p["loss"] for p in partials) / self.n
        primal = self._primal_at(task["version"], loss) if task["kind"] == "full" else \
            loss + self.lam * self.l1
        if task.get("hess"):  # Jacobi: it judges the steps before it, as a block round
            # (a stale one is still the workers' full round: its q goes to _extrapolate)
            back = None if task["version"] < self.reject_at else \
                self._judge(primal, task["version"], np.arange(self.p), q)
        self.primal = primal
        self.fulls += 1
        viol = np.empty(self.p)
        top = K.violations(self.w, q, self.thresh, viol)
        worst = float(viol.max()) if self.p else 0.0
        # (the workers keep these margins for the dual until their next full round)
        self.dual_c = min(1.0, self.thresh / top) if top > 0 else 1.0
        self.dual_acc = self._extrapolate(q, partials)
        self.dual_primal, self.dual_round, self.duals = primal, round, self.duals + 1
        if task.get("hess"):
            h = _sum(partials, "h")
            if "xc" in partials[0]:  # (the intercept eliminated, as in the rounds: _steps)
                q, h = ((self._schur(q, h, _sum(partials, "xc"), q[-1], h[-1], np.arange(
                    self.p) == self.p - 1) if h[-1] > 0 else None) or (q, h))[:2]
            GK.priorities(self.w, q, h, self.thresh, self.prio)
            self._tree = None
            self.primal = self.anchor[1]  # (the objective of the point kept)
            return back
        # working set: MAX_STALLS outer iterations in a row that lowered nothing (the
        # rounding floor) end the run; a worst violation halved is progress too (the gap
        # still falls where the objective no longer can)
        lower = primal < self.last_primal or worst < 0.5 * self.best_viol
        self.stalls = 0 if lower else self.stalls + 1
        self.last_primal, self.best_viol = primal, min(self.best_viol, worst)
        if self.stalls >= MAX_STALLS:
            self.exhausted = True
        if self._may_certify(q):  # the next round's dual may stop the run: wait for it
            self.held, self.next = (viol, q), {"kind": "certify"}
            return None
        return self._choose_ws(viol, q)

    def _may_certify(self, q):
        """The gap at this full round may be within tol: its lower bound, P - D(1) + (1 -
        c) D'(1) (D(c): the dual at c s, concave, D'(1) = q'w / n; P - D(1) = (thresh
        ||w||_1 - q'w) / n, Fenchel-Young), is, and c >= 1/2 (the tangent is close only
        near 1: far from it, at w ~ 0, it misses). The working set's direction is then
        left until the gap is known: at the end of a run it would be solved for nothing."""
        if self.tol <= 0 or self.dual_c < 0.5:
            return False
        a = float(q @ self.w)
        low = self.thresh * self.l1 - a + (1.0 - self.dual_c) * a
        return low <= self.tol * (self.primal if self.null is None else self.null) * self.n

    def _extrapolate(self, q, partials):
        """Celer's dual extrapolation (Massias et al. 2018, 2020): Anderson's weights z
        from the workers' Gram of the last full rounds' differences of s, and the scale
        from q = z @ (their q); (z, scale), or None (too few rounds, degenerate)."""
        self.q_hist.append(q)
        del self.q_hist[:-(ACCEL + 1)]
        if not all("uu" in p for p in partials) or len(self.q_hist) <= ACCEL:
            return None
        z = GK.anderson_weights(_sum(partials, "uu"))
        if z.shape[0] == 0:
            return None
        top = float(np.abs(z @ np.array(self.q_hist[1:])).max())
        return z, (min(1.0, self.thresh / top) if top > 0 else 1.0)

    # -- working set: prox-Newton ----------------------------------------------------------
    def _choose_ws(self, viol, q):
        """The support and the worst violators: max(min_size, 2 |support|) coordinates
        (3x if it filled 90% of the last working set), and every violator over EPS_TOL of
        the worst (the block is solved to that: one left out would stay the next full
        round's worst) up to VIOL_CAP times that size (on a correlated design nearly every
        column violates at a small support: a Newton step on them all costs a Gram of
        them all and fills a support to be dropped again), at most ``block_cap``; solved
        to EPS_TOL of the worst violation.
        When the kept Gram covers the new block, the first step is taken from it with
        this round's q (the line search checks it)."""
        worst = float(viol.max()) if viol.shape[0] else 0.0
        self.tol_in, self.ws_steps, self.last_in = EPS_TOL * worst, 0, worst
        # a support that filled the last working set is still growing (3x, not 2x, below);
        # its new coordinates are those that overshoot: a floor set stays
        growing = np.count_nonzero(self.w) >= 0.9 * self.ws.shape[0]
        self.floor = self.floor and growing
        if (self.reuse and not self.slow and self.G is not None and worst > 0.0
                and self.G_cols.shape[0] >= min(self.min_size, self.p)):
            # the kept Gram's block holds the support and every coordinate over EPS_TOL
            # of the worst violation: keep it
            outside = viol.copy()
            outside[self.G_cols] = 0.0
            if outside.max() <= EPS_TOL * worst:
                self.ws, self.fresh = self.G_cols, False
                self.reused += 1
                return self._direction(self.ws, q[self.ws])
        nonzero = self.w != 0
        nnz = int(np.count_nonzero(nonzero))
        base = max(self.min_size, (3 if growing else 2) * nnz)
        size = min(max(base, nnz + int(np.count_nonzero(viol > EPS_TOL * worst))),
                   VIOL_CAP * base, self.p)
        if self.block_cap:
            size = min(size, self.block_cap)
        pool, _ = working_set(nonzero, viol, size)
        self.ws = np.sort(pool)
        if self.ws.shape[0] == 0 or worst == 0.0:
            self.G = None
            self.next = {"kind": "full"}
            return None
        if self.reuse and not self.slow and self.G is not None:
            G = _restrict(self.G, self.G_cols, self.ws)
            if G is not None:
                self.G, self.G_cols, self.fresh = G, self.ws, False
                self.reused += 1
                return self._direction(self.ws, q[self.ws])
            form = _form(self.G)
            if form in ("dense", "factor"):  # extend the kept Gram by the new columns
                new = self.ws[~np.isin(self.ws, self.G_cols)]
                if new.shape[0] <= self.ws.shape[0] // 4:
                    self.q_ws = q[self.ws]
                    self.next = {"kind": "extend", "cols": self.ws, "new": new,
                                 "form": form}
                    return None
        self.G = None
        self.next = {"kind": "newton", "cols": self.ws}
        return None

    def _extend(self, task, partials):
        cols, new = task["cols"], task["new"]
        keep = np.isin(cols, self.G_cols)
        pos = np.searchsorted(self.G_cols, cols[keep])
        if task["form"] == "factor":  # (the kept columns, then the new ones: reordered)
            A, B = _take(self.G, pos), _factor(partials, new.shape[0])
            F = ("factor", np.concatenate([A[1], B[1][1:] + A[1][-1]]),
                 *(np.concatenate(ab) for ab in zip(A[2:5], B[2:5])), A[5])
            G = _take(F, np.argsort(np.concatenate([cols[keep], new]), kind="stable"))
        else:
            Gx = _sum(partials, "Gx")  # (k, m): the rows of the new columns
            G = np.empty((cols.shape[0], cols.shape[0]))
            GK.gram_keep(self.G, np.searchsorted(self.G_cols, cols), keep, G)
            at = np.searchsorted(cols, new)
            G[at, :] = Gx
            G[:, at] = Gx.T
        self.G, self.G_cols, self.fresh = G, cols, False
        self.reused += 1
        self.extended += 1
        q, self.q_ws = self.q_ws, None
        return self._direction(cols, q)

    def _newton(self, task, partials):
        cols = task["cols"]
        q = _sum(partials, "q")
        self.gram_rounds += 1
        if self._inner_done(cols, q, False):
            return None
        self.G, self.G_cols = _gram(partials, cols.shape[0]), cols
        self.fresh, self.slow, self.model_ok = True, False, False
        return self._direction(cols, q)

    def _inner_done(self, cols, q, after_step):
        """The working set is solved (or has had its steps): a full round is next. ``slow``:
        a step from a kept Gram cut the worst violation by less than half."""
        viol = np.empty(cols.shape[0])
        K.violations(self.w[cols], q, self.thresh, viol)
        worst = float(viol.max())
        if after_step:
            self.slow = not self.fresh and worst > 0.5 * self.last_in
        self.last_in = worst
        if self.ws_steps >= MAX_PN:  # (CD's directions crawl: see _polish)
            self.stalled = True
        if worst <= self.tol_in or self.ws_steps >= MAX_PN:
            self.next = {"kind": "full"}
            return True
        return False

    def _direction(self, cols, q):
        """Solve the quadratic model on the block from the kept Gram; the sync sending the
        direction (and the trial round next), or None."""
        b0, G, tol = self.w[cols], self.G, EPS_TOL * self.tol_in
        b = b0.copy()
        k = cols.shape[0] - 1 if self.intercept and cols[-1] == self.p - 1 else -1
        passes = _subproblem(G, q.copy(), b, self.thresh, tol, k)
        self.cd_passes += passes
        # CD left the subproblem unsolved on a crawling working set, or its face costs
        # less to factor: solve it on its face
        if passes >= MAX_CD and (self.stalled or self.ws_steps >= POLISH_AFTER
                                 or _cheap_face(G, b)):
            products = _polish(G, q, b0, b, self.thresh, tol, k)
            self.cd_passes += products
            self.polished += products > 0
        d = b - b0
        # predicted decrease, times n: -q'd + n lambda (|b|_1 - |b0|_1)
        delta = K.predicted_decrease(q, b0, b, self.thresh)
        if not delta < 0:  # no descent: a full round, or (a kept Gram's) a fresh Gram
            self.next = {"kind": "full"} if self.fresh else {"kind": "newton", "cols": cols}
            return None
        self.d, self.delta = d, delta / self.n
        self.curv = 0.5 * float(d @ _gram_times(G, d)) / self.n
        # with reuse, the Gram at t = 1 too (the next step a Newton step); and q over every
        # column, the loss (a full round's) where that costs at most twice q_B, or less
        # than a round: if the block is solved there, the next full round is this one
        share = self.col_share[cols].sum() if self.col_share is not None else 0.0
        full = self.col_share is not None and (
            2 * share >= 1 or (1.0 - share) * self.x_nnz <= ROUND_OPS)
        # (a factor's Gram is a gather of X's columns: kept only where it is a product)
        stale = self.model_ok and _form(G) != "factor"
        self.kept_steps += stale
        self.next = {"kind": "trial", "cols": cols, "steps": np.ones(1),
                     **({"gram": True} if self.reuse and not stale else {}),
                     **({"full": True} if full else {})}
        return {"dcols": cols, "ddelta": d}

    def _accepts(self, cols, t, diff, adiff):
        """Armijo on the exact objective change at step t: (ok, change, l1 change)."""
        b0 = self.w[cols]
        dl1 = K.l1_change(b0, self.d, t)
        change = diff / self.n + self.lam * dl1
        # the rounding of the two sums
        slack = 1e-14 * (adiff / self.n + self.lam * t * float(np.abs(self.d).sum()))
        return change <= ARMIJO * t * self.delta + slack, change, dl1

    def _commit(self, cols, t, change, dl1):
        before = np.count_nonzero(self.w[cols])
        self.w[cols] += t * self.d
        self.l1 += dl1
        self.nnz += np.count_nonzero(self.w[cols]) - before
        self.primal += change
        self.updates += cols.shape[0]
        self.newton_steps += 1
        self.ws_steps += 1

    def _trial(self, round, task, partials):
        cols, diff, adiff = self.ws, _sum(partials, "diff"), _sum(partials, "adiff")
        if "cols" in task:  # t = 1, with q_B there
            ok, change, dl1 = self._accepts(cols, 1.0, diff[0], adiff[0])
            if not ok:
                if self.fresh:
                    self.backtracks += 1
                    self.floor = True
                    self.next = {"kind": "trial", "steps": BACKOFF}
                    return None
                self.next = {"kind": "newton", "cols": cols}  # the kept Gram is stale
                return {"commit": 0.0}
            self._commit(cols, 1.0, change, dl1)
            # the model's curvature along d was the loss's, to half EPS_TOL on average (the
            # Hessian at t = 1 is off by about twice that): the kept Gram's next step still
            # cuts the violation to EPS_TOL, so no fresh Gram is built for it
            self.model_ok = abs(change - self.delta - self.curv) <= 0.5 * EPS_TOL * self.curv
            q = _sum(partials, "q")
            q = q[cols] if "full" in task else q
            if "gram" in task:  # a fresh Gram at the new point
                self.G, self.G_cols, self.fresh = _gram(partials, cols.shape[0]), cols, True
            if self._inner_done(cols, q, True):
                if "full" in task:  # (the workers keep this point as the full round's)
                    return {"commit": 1.0, "full": True,
                            **(self._full(round, task, partials) or {})}
                return {"commit": 1.0}
            if not self.reuse or self.slow:  # (slow: from a kept, stale Gram)
                self.next = {"kind": "newton", "cols": cols}
                return {"commit": 1.0}
            self.fresh = "gram" in task
            return {"commit": 1.0, **(self._direction(cols, q) or {})}
        for k, t in enumerate(task["steps"]):
            ok, change, dl1 = self._accepts(cols, float(t), diff[k], adiff[k])
            if ok:
                self._commit(cols, float(t), change, dl1)
                self.next = {"kind": "newton", "cols": cols}
                return {"commit": float(t)}
        self.next = {"kind": "full"}  # no step decreases the objective: a new working set
        return {"commit": 0.0}

    # -- Jacobi schedules ------------------------------------------------------------------
    def _jacobi(self, task, partials):
        loss = sum(p["loss"] for p in partials)
        return self._checked_steps(task, partials,
                                   self._primal_at(task["version"], loss / self.n),
                                   _sum(partials, "q"), _sum(partials, "h"))

    def _steps(self, task, partials, q, h):
        """With an intercept (the last column) eliminated (:func:`_subproblem`): steps along
        the columns less their D-weighted projections on it (where D weights few samples
        they are nearly collinear with it: plain Jacobi steps crawl), its own after them;
        plain ones where its sign would change; none from before its last move (stale)."""
        p0 = partials[0]
        gptr = p0.get("groups", task.get("groups"))  # (the workers' X_g' D X_g: "Gg")
        ok = "xc" in p0 and self.icpt_moved <= task["version"] and (gptr is None or "Gg" in p0)
        qc, hc = (float(v) for v in _sum(partials, "ic")) if ok else (0.0, 0.0)
        if not hc > 0.0:
            return super()._steps(task, partials, q, h)
        g, cols, wc = _sum(partials, "xc"), p0.get("cols", task["cols"]), float(self.w[-1])
        icpt, gram = cols == self.p - 1, None if gptr is None else _sum(partials, "Gg")
        grouped = (lambda gg: task) if gram is None else (  # (groups: see _schur_groups)
            lambda gg: dict(task, Gs=_schur_groups(gram, gg, gptr, hc, icpt)))
        el, b0 = self._schur(q, h, g, qc, hc, icpt), self.w[cols]
        if el is not None:
            w0 = (self.l1, self.nnz, self.updates, self.grouped)
            try:  # (a group's Gram less rounding can be indefinite: its solve fails)
                sync = super()._steps(grouped(np.where(el[2], 0.0, g)), partials, *el[:2])
                s = np.sign(wc + (qc - self.thresh * el[3] - g @ (self.w[cols] - b0)) / hc)
            except np.linalg.LinAlgError:
                s = np.nan
            if s != el[3]:
                self.w[cols], (self.l1, self.nnz, self.updates, self.grouped), el = b0, w0, None
        if el is None:  # (the intercept steps after them)
            sync = super()._steps(grouped(0 * g), partials, q, np.where(icpt, 0.0, h))
        v = qc - g @ (self.w[cols] - b0) + hc * wc  # (the model's q_c there, plus h_c w_c)
        new = wc + task.get("step", 1.0) * (math.copysign(max(abs(v) - self.thresh, 0.0), v)
                                            / hc - wc)
        if new != wc:
            self.w[-1], self.icpt_moved, self.l1 = new, self.done, self.l1 + abs(new) - abs(wc)
            self.nnz += int(new != 0.0) - int(wc != 0.0)
            sync = self._sync(np.append(sync["cols"], self.p - 1),
                              np.append(sync["delta"], new - wc))
        return sync

    def _schur(self, q, h, g, qc, hc, icpt):
        """q, h with the intercept (``icpt``) eliminated (g: X_j' D x_c; its own h 0; a
        column that repeats it, whose h vanishes, its own: a trade of penalties), those
        columns, its sign kept; None where it stays at 0."""
        sc = np.sign(self.w[-1] if self.w[-1] != 0.0 or abs(qc) <= self.thresh else qc)
        if sc == 0.0:
            return None
        h2, q2 = h - g * g / hc, q - g * ((qc - self.thresh * sc) / hc)
        plain = ~(h2 > 1e-12 * h) | ~np.isfinite(q2)  # (hc underflowed: g g / hc is inf)
        h2[plain], q2[plain] = h[plain], q[plain]
        h2[icpt] = 0.0
        return q2, h2, plain, sc

    # -- outputs ---------------------------------------------------------------------------
    def finish(self, collected):
        # the objective at the final model, from the workers' exact losses
        model = self._model(sum(float(c["loss"]) for c in collected))
        if self.classes is not None:
            model["classes"] = np.asarray(self.classes)
        return model

    def summary(self):
        return {"lambda": self.lam, "nnz_coef": int(np.count_nonzero(self.w)),
                "duality_gap": self.gap, "full_rounds": self.fulls,
                "newton_steps": self.newton_steps, "gram_rounds": self.gram_rounds,
                "line_search_backtracks": self.backtracks, "cd_passes": self.cd_passes,
                "polished": self.polished, "dual_extrapolated": self.accel_used,
                "gram_reused": self.reused, "gram_extended": self.extended,
                "gram_kept": self.kept_steps,
                "objective_rises": self.objective_rises, "grouped_updates": self.grouped}


def null_loss(n, y_sum, intercept):
    """The null model's mean loss: with an intercept (``y_sum`` = sum of the +-1 labels),
    the intercept-only model's, the entropy of the class shares; else w = 0's, log 2."""
    if not intercept:
        return math.log(2.0)
    p = min(max(0.5 * (1.0 + y_sum / n), 0.0), 1.0)
    return -sum(v * math.log(v) for v in (p, 1.0 - p) if v > 0.0)


def _schur_groups(gram, g, gptr, hc, icpt):
    """Groups' Gram matrices (group_steps' layout) less g_g g_g' / h_c, ``icpt``'s 0."""
    gram, off = gram.copy(), 0
    for a, k in zip(gptr[:-1], np.diff(gptr)):
        if k > 1:
            G = gram[off:off + k * k].reshape(k, k)
            G -= np.outer(g[a:a + k], g[a:a + k]) / hc
            G[icpt[a:a + k]], G[:, icpt[a:a + k]], off = 0.0, 0.0, off + k * k
    return gram


def _form(G):
    """The kept Gram's form: "dense" (an array), "csr" ("csr", ptr, idx, vals, diag),
    "factor" ("factor", ptr, rows, vals, column squared norms, n_rows: G = F'F) or None."""
    if G is None:
        return None
    return "dense" if isinstance(G, np.ndarray) else G[0]


def _cd(G, q, b, thresh, tol, mu=np.empty(0)):
    """Coordinate descent on the subproblem from ``b`` with the kept Gram in any of its
    forms (the factor's less mu mu') until the subproblem's own violation is within
    ``tol`` (or MAX_CD passes); returns the passes. CD's test, no move over ``tol``, ends
    a pass of many small moves along correlated columns whose sum leaves the violation
    where it was: the direction is then a sliver of the Newton step (a Gram wasted), so
    the test is tightened until the violation is met."""
    form, move, passes = _form(G), tol, 0
    h = G[4] if form in ("factor", "csr") else G.diagonal()
    while True:
        b0, q0 = b.copy(), q.copy()
        if form == "factor":
            p = GK.factor_cd(*G[1:], q, b, thresh, move, MAX_CD - passes, False, mu)
        elif form == "csr":
            p = K.cd_csr(*G[1:], q, b, thresh, move, MAX_CD - passes)
        else:
            p = GK.gram_cd(G, q, b, thresh, move, MAX_CD - passes, False)
        passes += p
        if form == "factor":  # (its CD leaves q at b0: the model's gradient at b here)
            d = b - b0
            q[:] = q0 - _gram_times(G, d) + (mu * (mu @ d) if mu.shape[0] else 0.0)
        viol = np.empty(b.shape[0])
        K.violations(b, q, thresh, viol)
        worst = float(viol[h > 0].max(initial=0.0))
        if worst <= tol or passes >= MAX_CD:
            return passes
        move *= max(0.5 * tol / worst, 1e-3)


def _subproblem(G, q, b, thresh, tol, k):
    """CD on the prox-Newton subproblem min 1/2 d'Gd - q'd + thresh |b|_1 (d = b - b0,
    ``b`` = b0 on entry) with coordinate ``k`` (an intercept's, -1: none) eliminated:
    CD on the others' Schur complement G_oo - g g' / G_kk (g = G_k,o, b_k's sign s_k
    kept), then d_k = (q_k - thresh s_k - g'd) / G_kk (CD crawls on a constant column,
    nearly collinear with every popular feature). If d_k flips the sign, or a column that
    repeats the intercept's (its reduced curvature 0) violates (the reduced problem is
    unbounded along it, a trade of their penalties), or the form is CSR, or b_k is 0:
    plain CD. Returns the passes."""
    if k < 0 or _form(G) == "csr":
        return _cd(G, q, b, thresh, tol)
    b0 = b.copy()
    # the sign b_k keeps (from 0: the one its move takes)
    sk = np.sign(b0[k]) if b0[k] != 0.0 or abs(q[k]) <= thresh else np.sign(q[k])
    if sk == 0.0:
        return _cd(G, q, b, thresh, tol)
    g, _ = _column(G, k)
    gkk, g[k], qk = g[k], 0.0, q[k] - thresh * sk
    mu, qq, factor = g / math.sqrt(gkk), q - g * (qk / gkk), _form(G) == "factor"
    Gs = None if factor else G - np.outer(mu, mu)
    h = G[4] - mu * mu if factor else Gs.diagonal().copy()
    # b_k stays (CD skips a zero diagonal), as do the columns the intercept's repeats
    rep = h <= 1e-12 * (G[4] if factor else G.diagonal())
    h[rep], h[k], rep[k] = 0.0, 0.0, False
    if factor:
        passes = _cd(G[:4] + (h,) + G[5:], qq, b, thresh, tol, mu)
    else:
        np.fill_diagonal(Gs, h)
        passes = _cd(Gs, qq, b, thresh, tol)
    bk, viol = b0[k] + (qk - g @ (b - b0)) / gkk, np.zeros(b.shape[0])
    K.violations(b, qq, thresh, viol)
    if np.sign(bk) == sk and not (viol[rep] > tol).any():
        b[k] = bk
        return passes
    b[:] = b0
    return passes + _cd(G, q, b, thresh, tol)


def _take(G, pos):
    """Columns ``pos`` of a kept factor ``G`` (rows in order) as the kept form: a gather,
    without building a scipy matrix (and its checks) a few times a fit."""
    _, ptr, rows, vals, h, n_rows = G
    lens = ptr[pos + 1] - ptr[pos]
    out = np.zeros(pos.shape[0] + 1, np.int64)
    np.cumsum(lens, out=out[1:])
    at = np.repeat(ptr[pos] - out[:-1], lens) + np.arange(out[-1])
    return ("factor", out, rows[at], vals[at], h[pos], n_rows)


def _column(G, k):
    """Column ``k`` of the kept Gram (dense or factored), and the factor's (None)."""
    if _form(G) != "factor":
        return G[:, k].copy(), None
    _, ptr, rows, vals, _, n_rows = G
    f = np.zeros(n_rows)
    f[rows[ptr[k]:ptr[k + 1]]] = vals[ptr[k]:ptr[k + 1]]
    g = np.empty(ptr.shape[0] - 1)
    GK.grad_sparse(ptr, rows, vals, f, np.arange(g.shape[0]), g)  # F'f
    return g, f


def _gram_times(G, v):
    """G v for the kept Gram in any of its forms."""
    form = _form(G)
    if form == "factor":
        _, ptr, rows, vals, _, n_rows = G
        return K.factor_times(ptr, rows, vals, v, np.zeros(n_rows), np.empty(v.shape[0]))
    if form == "csr":
        return K.csr_times(*G[1:4], v, np.empty(v.shape[0]))
    return G @ v


def _face(G, A, m):
    """G_AA as :func:`K.face_cg` takes it: (ptr, rows, vals, n_rows, dense G_AA, its
    diagonal)."""
    form = _form(G)
    none = np.empty(0, np.int64)
    if form == "factor":
        _, ptr, rows, vals, _, _ = _take(G, A)
        return ptr, rows, vals, G[5], np.empty((0, 0)), G[4][A]
    if form == "csr":
        _, ptr, idx, vals, _ = G
        GA = sp.csr_matrix((vals, idx, ptr), shape=(m, m))[A][:, A].toarray()
    else:
        GA = np.ascontiguousarray(G[np.ix_(A, A)])
    return none, none, np.empty(0), 0, GA, GA.diagonal().copy()


def _face_solve(G, A, m, xA, r, tol, j):
    """:func:`K.face_cg` on G_AA e = r (xA += e), A's ``j``-th coordinate (-1: none)
    eliminated as in :func:`_subproblem` (not from a CSR Gram). Returns the products."""
    if j < 0 or _form(G) == "csr":
        ptr, rows, vals, n_rows, GA, h = _face(G, A, m)
        return K.face_cg(ptr, rows, vals, n_rows, GA, np.maximum(h, 1e-300), xA, r, tol,
                         POLISH_IT, np.empty(0))
    col, f = _column(G, A[j])
    gkk = col[A[j]]
    o = np.delete(np.arange(A.shape[0]), j)
    g = col[A[o]]
    ptr, rows, vals, n_rows, GA, h = _face(G, A[o], m)
    if f is None:
        GA = GA - np.outer(g, g) / gkk
        f = np.empty(0)
    else:
        f = f / math.sqrt(gkk)
    h_s = np.maximum(h - g * g / gkk, 1e-12 * h + 1e-300)
    ro, xo = r[o] - g * (r[j] / gkk), xA[o].copy()
    products = K.face_cg(ptr, rows, vals, n_rows, GA, h_s, xo, ro, tol, POLISH_IT, f)
    xA[j] += (r[j] - g @ (xo - xA[o])) / gkk
    xA[o] = xo
    return products


def _cheap_face(G, b):
    """A Cholesky of the face of ``b`` (|A|^3 / 3 flops) costs less than CD's MAX_CD
    passes over the factor or the dense Gram (a pass: 2 flops a factor entry, or 2 m a
    moved coordinate; scattered flops LAPACK_SPEEDUP times as dear)."""
    form, a = _form(G), np.count_nonzero(b)
    if form == "csr":
        return False
    pass_flops = 2 * int(G[1][-1]) if form == "factor" else 2 * a * b.shape[0]
    return a ** 3 <= 3 * LAPACK_SPEEDUP * MAX_CD * pass_flops


def _face_factor(G, A, m):
    """The Cholesky factor of G_AA (a ridge of 1e-12 of its diagonal: G_AA may be
    singular) when it costs less than a CG solve's POLISH_IT products and |A| <= 4,000;
    else (or if it fails) None."""
    form, a = _form(G), A.shape[0]
    if form == "factor":
        cg = POLISH_IT * LAPACK_SPEEDUP * 4 * int((G[1][A + 1] - G[1][A]).sum())
    else:
        cg = POLISH_IT * 3 * 2 * a * a
    if a > 4000 or a ** 3 > 3 * cg:
        return None
    GA = GK.gram_sparse(*G[1:4], A, G[5]) if form == "factor" else _face(G, A, m)[4]
    d = GA.diagonal().copy()
    GA[np.diag_indices(a)] = d + 1e-12 * d + 1e-300
    try:  # (GA is ours and symmetric: LAPACK factors it in place as its Fortran transpose)
        return la.cho_factor(GA.T, lower=True, overwrite_a=True, check_finite=False)
    except la.LinAlgError:
        return None


def _face_direct(chol, G, q, b0, x, A0, thresh):
    """:func:`_polish`'s active-set steps (x moved in place; returns their number) from
    the Cholesky factor of G_A0A0: the face less the dropped coordinates D as the
    bordered system G_A0A0 e = r + E lam, e = 0 on D, a triangular solve a step."""
    r = (q - _gram_times(G, x - b0))[A0] - thresh * np.sign(x[A0])  # (0 on D)
    y = la.cho_solve(chol, r, check_finite=False)  # G^-1 r
    on = np.ones(A0.shape[0], dtype=np.bool_)
    cols = {}  # G^-1 E's columns, by position in A0
    for step in range(1, FACTOR_STEPS + 1):
        e = y
        if cols:
            off = np.fromiter(cols, np.int64)
            W = np.column_stack([cols[i] for i in off])
            try:
                e = y + W @ np.linalg.solve(W[off], -y[off])
            except np.linalg.LinAlgError:  # (the dropped coordinates' block: singular)
                return step
        if not np.all(np.isfinite(e)):
            return step
        xA = x[A0]
        cross = on & (np.sign(xA + e) != np.sign(xA))
        if not cross.any():
            x[A0[on]] = (xA + e)[on]
            return step
        at = np.flatnonzero(cross)
        t = xA[at] / (xA[at] - (xA + e)[at])  # where each reaches zero
        first = int(np.argmin(t))
        i, t = at[first], float(t[first])
        x[A0[on]] += t * e[on]
        x[A0[i]] = 0.0
        on[i] = False
        unit = np.zeros(A0.shape[0])
        unit[i] = 1.0
        cols[i] = la.cho_solve(chol, unit, check_finite=False)
        y = (1.0 - t) * (y - r[i] * cols[i])
        r = (1.0 - t) * r
        r[i] = 0.0
    return FACTOR_STEPS


def _polish(G, q, b0, b, thresh, tol, k=-1):
    """The subproblem min_b 1/2 d'Gd - q'd + thresh |b|_1 (d = b - b0) on the face of
    CD's ``b`` (support A, signs s): G_AA d_A = q_A - thresh s - G_A,~A d_~A, by a
    Cholesky where cheap (:func:`_face_factor`), else by preconditioned CG to ``tol``
    (CD crawls on an ill-conditioned G). A sign change moves ``b`` to the first zero
    crossing and solves the smaller face (active-set steps); coordinate ``k`` (-1: none)
    is eliminated in CG. Returns the Gram products (0: ``b`` did not move)."""
    m = b.shape[0]
    x = b.copy()
    A0 = np.flatnonzero(x)
    chol = _face_factor(G, A0, m) if A0.shape[0] else None
    products = 0 if chol is None else _face_direct(chol, G, q, b0, x, A0, thresh)
    for _ in range(POLISH_STEPS if chol is None else 0):
        A = np.flatnonzero(x)
        if A.shape[0] == 0:
            break
        sign = np.sign(x[A])
        r = (q - _gram_times(G, x - b0))[A] - thresh * sign
        products += 1
        xA = x[A].copy()
        products += _face_solve(G, A, m, xA, r, tol, np.searchsorted(A, k) if k in A
                                else -1)
        if not np.all(np.isfinite(xA)):
            break
        cross = np.sign(xA) != sign
        if not cross.any():
            x[A] = xA
            break
        t = x[A][cross] / (x[A][cross] - xA[cross])  # where each reaches zero
        first = int(np.argmin(t))
        x[A] += t[first] * (xA - x[A])
        x[A[np.flatnonzero(cross)[first]]] = 0.0

    def model(v):
        dv = v - b0
        return 0.5 * dv @ _gram_times(G, dv) - q @ dv + thresh * np.abs(v).sum()
    if not model(x) < model(b):
        return 0
    b[:] = x
    return products


def _restrict(G, cols, new):
    """The kept Gram ``G`` of block ``cols`` restricted to ``new`` (dense and factored:
    any subset; CSR: the same block only), or None."""
    if G is None or cols is None:
        return None
    if cols.shape == new.shape and np.array_equal(cols, new):
        return G
    form = _form(G)
    if form == "csr":
        return None
    pos = np.searchsorted(cols, new)
    pos[pos == cols.shape[0]] = 0
    if not np.array_equal(cols[pos], new):
        return None
    if form == "factor":
        return _take(G, pos)
    return G[np.ix_(pos, pos)]


def _gram(partials, m):
    """The block's Gram from the workers' parts in worker order: factored or CSR if every
    worker sent that, else dense."""
    if all("Fp" in p for p in partials):
        return _factor(partials, m)
    if all("Gp" in p for p in partials):
        return ("csr", *K.csr_merge(*_stack(partials, m, "Gp", "Gi", "Gv"), m))
    return _gram_sum(partials, m)
