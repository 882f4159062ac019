"""The generalised linear models' schedules (priority with its dependency filter,
round-robin, random: Jacobi rounds; working-set: blocks the datafit solves on the
scheduler). A round's tasks are the datafit aggregate's (``full_task``, ``block_task``);
a schedule reads the aggregate and never writes it. Rounds in flight hold disjoint
coordinates, so a staleness above :func:`max_staleness` is refused. Notes:
docs/apps/lasso.md.
"""
from collections import deque

import numpy as np
import scipy.sparse as sp

from ...api import Schedule
from ...errors import DataError
from . import groups as KG
from . import kernels as K

CALM_ROUNDS = 20  # rounds without an objective rise before the block or step grows back


def max_staleness(n_features, block):
    """The largest useful staleness: rounds in flight hold disjoint coordinates, and
    ceil(n_features / block) blocks cover every feature."""
    block = max(1, min(int(block), int(n_features)))
    return -(-int(n_features) // block)


def working_set(nonzero, score, size):
    """The support and the coordinates of highest positive ``score``: all of them if
    they are at most ``size``, else ``size`` of them, the support first if it fits.
    Returns them and their scores (the support's infinite)."""
    pool = np.flatnonzero(nonzero | (score > 0))
    score = score[pool]
    if np.count_nonzero(nonzero) <= size:
        score[nonzero[pool]] = np.inf
    if pool.shape[0] > size:
        keep = np.argpartition(-score, size - 1)[:size]
        pool, score = pool[keep], score[keep]
    return pool, score


class _Clocked(Schedule):
    """What every schedule does: check the staleness and start the clock of
    ``time_limit`` at the first call (a checkpoint keeps the time used, not the clock),
    hold the coordinates in flight, attach the dual the aggregate asks for."""

    checkpoint_skip = ("time_limit", "wall_deadline", "_started", "_clock0", "max_block",
                       "min_size")
    staleness = 0
    time_limit = None
    wall_deadline = None
    _started = False
    _clock0 = None  # self.clock() at the start, less the time a resumed run used
    _used = 0.0  # seconds used before a resume
    _duals_taken = 0
    last_full = None  # the last full round scheduled (Jacobi)

    def _init(self, agg, block, time_limit, staleness):
        self.agg, self.staleness, self.time_limit = agg, staleness, time_limit
        self.p = agg.w.shape[0]
        self.block = block
        self.busy = np.zeros(self.p, dtype=np.bool_)  # in an unaggregated round
        self._flight = deque()  # (round, its coordinates) not yet aggregated

    def _begin_round(self, round):
        """Start the clock at the first call; free the coordinates of the rounds the
        aggregate has taken (``agg.done``, in order)."""
        if not self._started:
            self._start()
        self._round = round
        done = self.agg.done
        while self._flight and self._flight[0][0] < done:
            self.busy[self._flight.popleft()[1]] = False

    #: counts that size a round's arrays: at most the coordinates (or the run's --block)
    _SIZES = ("block",)

    def load_state(self, state):
        top = max(self.p, *(getattr(self, k) or 0 for k in self._SIZES))
        super().load_state(state)
        for k in self._SIZES:
            v = getattr(self, k)
            if v is not None and not (isinstance(v, (int, np.integer)) and 0 <= v <= top):
                raise ValueError(f"{k}: {v!r} is not a count of this run's coordinates")
        held = np.zeros(self.p, dtype=np.bool_)  # the rounds in flight hold what is busy
        for item in self._flight:
            cols = item[1] if isinstance(item, tuple) and len(item) == 2 else None
            if not (isinstance(cols, np.ndarray) and cols.dtype.kind in "iu" and
                    cols.ndim == 1 and ((cols >= 0) & (cols < self.p)).all()):
                raise ValueError("_flight: not rounds of this run's coordinates")
            held[cols] = True
        if not np.array_equal(held, self.busy):
            raise ValueError("_flight: not the coordinates in flight")

    def _hold(self, cols):
        """``cols`` are in flight from this round until the aggregate has taken it."""
        self.busy[cols] = True
        self._flight.append((self._round, cols))

    def _start(self):
        self._started = True
        p, block = self.p, self.block
        top = max_staleness(p, block)
        if self.staleness > top:
            raise DataError(
                f"staleness {self.staleness} is above the useful maximum "
                f"{top} = ceil({p} features / block {min(block, p)}): "
                "rounds in flight hold disjoint coordinates, so more could only be empty "
                f"(use a staleness of at most {top})")
        self._clock0 = self.clock() - self._used  # (leaderless: the agreed time)
        if self.time_limit:
            self.wall_deadline = self._clock0 + self.time_limit

    def _attach_dual(self, task):
        """The logistic loss's gap: ask for the dual's entropy sum in ``task`` if a full
        round waits for it (``agg.duals``) and no later one has gone out."""
        agg = self.agg
        if agg.duals > self._duals_taken:
            self._duals_taken = agg.duals
            if self.last_full is None or self.last_full == agg.dual_round:
                task["dual"] = agg.dual_c
                if agg.dual_acc is not None:
                    task["accel"] = agg.dual_acc
        return task

    def state(self):
        state = super().state()
        if self._clock0 is not None:
            state["_used"] = self.clock() - self._clock0
        return state


class _Jacobi(_Clocked):
    # on an objective rise, halve the step with the block too (Priority)
    damp_with_block = False

    def __init__(self, agg, block, full_every, seed, time_limit=None, staleness=0):
        self._init(agg, block, time_limit, staleness)
        self.step = 1.0  # relaxation of the coordinate steps
        # never more than the features (else halving on rises would not shrink rounds)
        self.block = max(1, min(int(block), self.p))
        self.max_block, self.rises, self.calm = self.block, 0, 0
        self.full_every = int(full_every)
        self.rng = np.random.default_rng(seed)
        self.since_full = None  # updates scheduled since the last full round

    def schedule(self, round):
        agg = self.agg
        self._begin_round(round)
        if agg.objective_rises > self.rises:
            # the updates interfere: halve the block; at one coordinate, the step
            self.rises, self.calm = agg.objective_rises, 0
            if self.block > 1:
                self.block //= 2
                if self.damp_with_block:
                    self.step = max(self.step / 2, 1 / 1024)
            else:
                self.step = max(self.step / 2, 1 / 1024)
        else:
            self.calm += 1
            if self.calm >= CALM_ROUNDS:  # grow back gently once it has been calm a while
                self.calm = 0
                if self.step < 1:
                    self.step = min(1.0, 2 * self.step)
                else:
                    self.block = min(self.block + max(1, self.block // 4), self.max_block)
        if self.since_full is None or self.since_full >= self.full_every or \
                self._refresh_due():
            self.since_full = 0
            task = self._attach_dual(agg.full_task())
            self.last_full = round
            return task
        cols = self.choose(min(self.block, self.p))
        self.since_full += cols.shape[0]
        self._hold(cols)
        return self._attach_dual(agg.block_task(cols, self.step))

    def _refresh_due(self):
        """A full round before ``full_every`` updates (priority: see there)."""
        return False

    def free(self, cols):
        return cols[~self.busy[cols]]


class RoundRobin(_Jacobi):
    pos = 0

    def choose(self, b):
        cols = (self.pos + np.arange(b)) % self.p
        self.pos = int((self.pos + b) % self.p)
        return np.unique(self.free(cols))


class Random(_Jacobi):
    def choose(self, b):
        return np.unique(self.free(self.rng.integers(0, self.p, b)))


class Priority(_Jacobi):
    """STRADS' schedule: candidates drawn by priority, then ``floor`` of them uniformly;
    the dependency filter groups them greedily (:mod:`.groups`): a group is solved
    exactly, the groups step in parallel; the task names the groups (``groups``:
    boundaries in ``cols``). Full rounds also come once the priorities are spent.
    Dense X on the scheduler, or sparse X on the workers: once the pool's Gram is held,
    a round's block is solved as one group (:meth:`_choose_exact`). Without the
    scheduler's X (``X`` None) the workers filter (``select`` in the task), and hold the
    pool's Gram (``held``: worker 0 sends the block's). Notes: docs/apps/lasso.md."""
    checkpoint_skip = _Jacobi.checkpoint_skip + ("cols", "_head", "_known", "_conf", "_gptr",
                                                "_out", "_filled", "_G", "_exact",
                                                "_last_exact")
    _SIZES = ("block", "_n_kept", "filter_cap", "_plain_cap", "_plain_last")
    # the priority draws (the coordinates that move most, often neighbours) can
    # overshoot together: every rise halves the step as well as the block
    damp_with_block = True
    merge_on_rise = True
    # staleness: the Gram between a round and those in flight goes with it (quadratic)
    stale_gram = True
    exact_pool = True
    # sparse X: plain rounds where the filter cannot afford the block, its stop priced
    # as its budget (CHASE a step)
    plain_rounds = True
    _exact = None  # this round's (groups, Gs) when its block is solved as one group
    _last_exact = None  # the last such block and its Gram matrix
    _sent = 0  # the candidates sent to the workers' filter in its last round
    _wheld = None  # the columns whose Gram the workers hold (:meth:`_hold_pool`)
    _send_pool = None  # what the next block task tells the workers to hold

    def __init__(self, agg, block, full_every, seed, X, rho, floor, time_limit=None,
                 staleness=0):
        super().__init__(agg, block, full_every, seed, time_limit, staleness)
        _warmup()
        self.rho, self.floor = filter_rho(rho, agg.n), float(floor)
        self.remote = X is None  # parallel loading: the workers hold X and filter
        self.dense = False
        if self.remote:
            self.cols = None
        elif sp.issparse(X):
            self.cols = (X.indptr, X.indices, X.data)
            self._head = np.full(X.shape[0], -1, dtype=np.int64)
            rows = np.bincount(X.indices, minlength=X.shape[0]).astype(np.float64)
            self._row_squares = float(rows @ rows)  # (X'X's cost, row by row)
            self._col_cost = X.nnz / max(self.p, 1)  # (a column's update)
        else:
            self.cols = (X,)
            self.dense = True
            self._col_cost = X.shape[0]
        self._known = self._conf = None  # the dense filter's cache
        self._filled = False  # every pair of it computed at once (:meth:`_fill_price`)
        self._G = None  # then X'X's lower triangle, if it fits FILTER_CACHE_BYTES
        self._spent = 0  # the filter's multiply-adds so far
        self._gptr = NO_GROUPS  # the last block's groups (none: every group of one)
        self.seen = np.zeros(self.p, dtype=np.bool_)  # scratch of the distinct draws
        self._out = np.empty(2 * self.block + 1, np.int64)  # a block and its groups
        self._u = np.empty(0)  # uniforms drawn from self.rng, used from _u_pos on
        self._u_pos = 0
        self._fulls_seen = 0
        self._n_kept = self.block  # kept by the filter in the last round
        self.filter_cap = None  # the block the filter may fill (:meth:`_afford`)
        self._mass0 = 0.0  # the sum tree's mass after the last full round
        self._active0 = 0  # coordinates with a priority after it
        # dense X: the pool (what the last full round found moving) and, once bought,
        # the Gram matrix of the pools held so far (:meth:`_pool_gram`)
        self._pool = NO_GROUPS
        self._pool_fulls = 0
        self._held = NO_GROUPS  # the coordinates of _PG's rows, in order
        self._slot = None  # a coordinate's row of _PG (-1: none)
        self._PG = None
        self._blocks_seen = self._updates_seen = 0  # the aggregate's, at the last _heard
        # sparse X: plain rounds where the filter cannot afford the block (:meth:`choose`)
        self._plain_cap, self._plain_last = self.block, 0

    def _refresh_due(self):
        agg = self.agg
        if agg.done <= self.last_full:  # the last full round is not aggregated yet
            return False
        if agg.fulls != self._fulls_seen:  # its priorities: the mass to spend
            self._fulls_seen = agg.fulls
            self._mass0 = float(agg.tree[1])
            self._active0 = int(np.count_nonzero(agg.prio))
        return (self._mass0 > 0.0 and self.since_full >= max(self._active0, 1)
                and agg.tree[1] <= REFRESH * self._mass0)

    def schedule(self, round):
        rises = self.agg.objective_rises
        if rises > self.rises and self._plain_last:
            # a rise after plain rounds halves their block, not the filter's
            self.rises, self.calm = rises, 0
            self._plain_cap, self._plain_last = max(1, self._plain_last // 2), 0
        task = super().schedule(round)
        if self.last_full == round:
            return task
        if self._send_pool is not None:
            task["pool"], self._send_pool = self._send_pool, None
        if self.stale_gram and self.staleness and not self.remote:
            self._stale_gram(task, round)
        if self.remote and self._b:
            # the workers filter the candidates (they return the block and its groups)
            task["select"] = (self.rho, self._b)
        elif self._exact is not None:
            task["groups"], gs = self._exact
            if gs is None:  # (the workers' held pool: worker 0 sends the block's Gram)
                task["held"] = True
            else:
                task["Gs"] = gs
        elif self._gptr.shape[0]:
            task["groups"] = self._gptr
            if self._G is not None:  # (the workers need not sum them)
                # X'X's own diagonal: with an intercept sq_norms are centred, and the
                # aggregate centres Gs (the diagonal too)
                cols = task["cols"]
                task["Gs"] = KG.group_gram_lower(self._G, cols, self._gptr, self._G[cols, cols])
        return task

    def _stale_gram(self, task, round):
        """With rounds in flight, this round's x_j' r miss their steps: the Gram between
        its block and theirs (``Gx``, columns ``xcols``) lets the aggregate add them
        (:meth:`GLMAggregate._unstale`), from X'X or the pool's Gram when held, else
        from X, counted as the filter's work (it buys them sooner)."""
        flight = [c for r, c in self._flight if r != round]
        cols = task["cols"]
        if not flight or not cols.shape[0]:
            return
        xcols = np.sort(np.concatenate(flight))
        if self._G is not None:  # (sparse X: its lower triangle)
            R, C = np.meshgrid(cols, xcols, indexing="ij")
            gx = self._G[np.maximum(R, C), np.minimum(R, C)]
        elif self.dense and self._slot is not None and (self._slot[cols] >= 0).all() \
                and (self._slot[xcols] >= 0).all():
            gx = self._PG[np.ix_(self._slot[cols], self._slot[xcols])]
        elif self.dense:
            X = self.cols[0]
            gx = X[:, cols].T @ X[:, xcols]
            self._spent += cols.shape[0] * xcols.shape[0] * self.agg.n / BLAS_SPEEDUP
        else:
            X = sp.csc_matrix(self.cols[::-1], shape=(self.agg.n, self.p))
            gx = (X[:, cols].T @ X[:, xcols]).toarray()
            self._spent += float(np.diff(X.indptr)[cols].sum()) * xcols.shape[0]
        task["Gx"], task["xcols"] = gx, xcols

    def _heard(self):
        """The workers' filter: how many it kept, for :meth:`candidates`, from the
        aggregate's updates (per block round, since the last call)."""
        agg = self.agg
        blocks = agg.done - agg.fulls
        if blocks > self._blocks_seen:
            new = agg.updates - self._updates_seen
            self._n_kept = -(-new // (blocks - self._blocks_seen))
            self._blocks_seen, self._updates_seen = blocks, agg.updates

    def load_state(self, state):
        super().load_state(state)
        if self._wheld is not None:  # (the workers' held Gram is not state: sent again)
            if not (isinstance(self._wheld, np.ndarray) and self._wheld.dtype == np.bool_
                    and self._wheld.shape == (self.p,)):  # (a fresh one's None: unchecked)
                raise ValueError("_wheld: not a mark for each of this run's coordinates")
            self._send_pool = np.flatnonzero(self._wheld)
        u = self._u  # (the kernels index with u * p)
        if not 0 <= self._u_pos <= u.shape[0] or ((u < 0) | ~(u < 1)).any():
            raise ValueError("_u: not uniforms in [0, 1) from _u_pos on")
        held, pool = self._held, self._pool  # (the kernels index _PG with _slot)
        ok = all(isinstance(a, np.ndarray) and a.dtype.kind in "iu" and a.ndim == 1 and
                 ((a >= 0) & (a < self.p)).all() for a in (held, pool))
        if ok and self._PG is not None:
            k = held.shape[0]
            slot = self._slot
            ok = (isinstance(self._PG, np.ndarray) and self._PG.shape == (k, k) and
                  isinstance(slot, np.ndarray) and slot.shape == (self.p,) and
                  np.count_nonzero(slot >= 0) == k and (slot[held] == np.arange(k)).all())
        if not ok:
            raise ValueError("_PG: not the Gram matrix of this run's pool")

    def _uniforms(self, k):
        if self._u_pos + k > self._u.shape[0]:
            self._u = np.concatenate([self._u[self._u_pos:],
                                      self.rng.random(max(k, RANDOM_CHUNK))])
            self._u_pos = 0
        return self._u[self._u_pos:]

    def candidates(self, b):
        """A round's candidates, in the order the filter reads them."""
        # a quarter more than the block, at most twice what the filter kept last round
        # plus 64 (it stops once its rejections exceed its keeps by 16)
        n_cand = min(5 * b // 4, 2 * self._n_kept + 64)
        return self._draw(n_cand, self._pool if self._pool_held() else None)

    def _draw(self, n_cand, pool=None):
        """``n_cand`` candidates: distinct draws by priority (with peaked priorities,
        repeats would shrink the block), then ``floor`` of them uniform over the
        coordinates, or over ``pool``."""
        n_prio = n_cand - int(round(self.floor * n_cand))
        cand = np.empty(n_cand, dtype=np.int64)
        tree = self.agg.tree
        used = K.priority_candidates(tree, self._uniforms(2 * n_cand), n_cand, n_prio,
                                     self.p if pool is None else pool.shape[0], self.seen,
                                     cand)
        self._u_pos += used
        if pool is not None:  # (the uniform ones: positions in the pool)
            drawn = n_prio + n_cand - used if n_prio > 0 and tree[1] > 0.0 else 0
            cand[drawn:] = pool[cand[drawn:]]
        return cand

    def _free(self, cand):
        """The candidates not in flight, each once, in draw order."""
        cand = cand[~self.busy[cand]]
        _, first = np.unique(cand, return_index=True)
        return cand[np.sort(first)]

    def choose(self, b):
        self._exact, self._gptr = None, NO_GROUPS
        if not self.remote and not self._filled and self._spent + self._prepaid() >= \
                self._fill_price():
            self._fill()
        if self.exact_pool and self.dense and not self.remote and self._pool_gram():
            # (these steps see each other, not those of the rounds in flight)
            return self._choose_exact(b if self.staleness else self.max_block)
        if self.remote:
            self._heard()
            self._hold_pool()
            if self._pool_held():  # (exact rounds, as the dense ones: the workers' Gram)
                self._b = 0
                b = b if self.staleness else self.max_block
                support = self._pool[self.agg.w[self._pool] != 0]
                # a support larger than the block, in every block: split between rounds,
                # its correlated pieces would move by block coordinate descent
                return self._choose_exact(b, support if support.shape[0] > b else None)
        plain = min(b, self._plain_cap)
        if self.plain_rounds and not (self.dense or self._filled) and \
                (self.filter_cap or b) < plain and 2 * self._n_kept > self._sent:
            # the sparse filter (the scheduler's, or the workers' if they kept most of the
            # candidates sent: the budget, not the columns' dependence, held the block)
            # cannot afford the block: a plain Jacobi round (as round-robin's) of the
            # largest block no such round has risen at
            cand = self.candidates(b)
            self._n_kept = self._plain_last = plain
            self._b = 0  # (no "select": the workers step the block as it is)
            return np.sort(self._free(cand)[:plain])
        if self.remote:
            b = min(b, self.filter_cap or b)
        cand = self.candidates(b)
        if self.remote:  # distinct, free, non-empty candidates, in draw order
            self._b = b
            cand = self._free(cand)
            cand = cand[self.agg.norms[cand] > 0]
            nnz = getattr(self.agg, "col_nnz", None)
            if nnz is not None:  # the workers' Gram: the rows' candidates squared, at least
                z = np.cumsum(nnz[cand], dtype=np.float64)
                price = z * z / self.agg.n + np.arange(1.0, z.shape[0] + 1) ** 2
                update = z[min(b, z.shape[0]) - 1] if z.shape[0] else 0.0
                self._afford(price[-1] if z.shape[0] else 0.0, update)
                # priced before it is sent: no more of them than the budget affords (the
                # first drawn), the first round's too
                top = np.searchsorted(price, 2 * AFFORD * (update + ROUND_COST), "right")
                cand = cand[:max(1, top)]
                self._spent += price[cand.shape[0] - 1] if z.shape[0] else 0.0
            self._sent = cand.shape[0]
            return cand
        # (busy doubles as the filter's "already taken" mask)
        b = min(b, self.filter_cap or b)
        if self._out.shape[0] <= 2 * b:  # (a resumed run's block may exceed this one's)
            self._out = np.empty(2 * b + 1, np.int64)
        if not self.dense and not self._filled:
            m, n_ptr, work, update = KG.block_sparse(
                *self.cols, self.agg.norms, cand, self.rho, b, self.busy, self._head,
                KG.GROUP_CAP, 2 * AFFORD / (CHASE if self.plain_rounds else 1), ROUND_COST,
                self._out)
        else:  # (every pair known, sparse X: the kernel never reads its columns)
            cache = (self._known, self._conf) if self._cache() else KG.NO_CACHE
            X = self.cols[0] if self.dense else np.empty((self.agg.n, 0), order="F")
            m, n_ptr, work, update = KG.block_dense(
                X, self.agg.norms, cand, self.rho, b, self.busy, *cache, KG.GROUP_CAP,
                2 * AFFORD, ROUND_COST, self._out,
                self.merge_on_rise and self.agg.objective_rises > 0)
        self._spent += work
        self._afford(work * (1 if self.dense or self._filled else CHASE), update)
        self._n_kept = m
        self._gptr = self._out[m:m + n_ptr].copy() if n_ptr else NO_GROUPS
        return self._out[:m].copy()

    def _hold_pool(self):
        """The workers' filter (sparse X): the last full round's pool (what it found
        moving), its new members' pairs priced as the filter's Gram, is held by the
        workers (``pool`` in the task: all it holds) once that price is at most what the
        filter has spent (rent or buy, as :meth:`_buy_pool`)."""
        agg = self.agg
        nnz = getattr(agg, "col_nnz", None)
        if not self.exact_pool or nnz is None or agg.fulls == self._pool_fulls:
            return
        self._pool_fulls = agg.fulls
        if self._wheld is None:
            self._wheld = np.zeros(self.p, dtype=np.bool_)
            self._col_cost = nnz.sum() / max(self.p, 1)
        held = self._wheld
        self._pool = np.flatnonzero((agg.prio > 0) | (agg.w != 0))
        new = self._pool[~held[self._pool]]
        k = np.count_nonzero(held) + new.shape[0]
        z_new = float(nnz[new].sum())
        price = z_new * (z_new + float(nnz[held].sum())) / agg.n + new.shape[0] * k
        if new.shape[0] and 8 * min(2 * k, self.p) ** 2 <= FILTER_CACHE_BYTES and \
                price <= self._spent + self._prepaid():
            held[new] = True
            self._send_pool = np.flatnonzero(held)

    def _pool_held(self):
        """Whether the workers hold the whole pool's Gram (:meth:`_hold_pool`)."""
        return self._wheld is not None and self._pool.shape[0] > 0 and \
            bool(self._wheld[self._pool].all())

    def _pool_gram(self):
        """Whether the pool's Gram matrix is held (dense X, the scheduler's). The pool: the
        coordinates the last full round found moving; its new members' pairs are bought
        by BLAS once their price (as X'X's) is at most what the filter has spent."""
        agg = self.agg
        if agg.fulls != self._pool_fulls:
            self._pool_fulls = agg.fulls
            self._pool = np.flatnonzero((agg.prio > 0) | (agg.w != 0))
            if self._G is None:
                self._buy_pool()
        return agg.fulls > 0 and (self._G is not None or self._PG is not None and
                                  not (self._slot[self._pool] < 0).any())

    def _buy_pool(self):
        slot = self._slot if self._slot is not None else np.full(self.p, -1, np.int64)
        new = self._pool[slot[self._pool] < 0]
        if not new.shape[0]:
            return
        held, n_new = self._held, new.shape[0]
        rows = held.shape[0] + n_new
        if n_new * rows * self.agg.n / BLAS_SPEEDUP > self._spent + self._prepaid() or \
                8 * rows * rows > FILTER_CACHE_BYTES:
            return
        X = self.cols[0]
        Xn = X[:, new]
        PG = np.empty((rows, rows))
        if self._PG is not None:
            PG[:held.shape[0], :held.shape[0]] = self._PG
            PG[:held.shape[0], held.shape[0]:] = X[:, held].T @ Xn
            PG[held.shape[0]:, :held.shape[0]] = PG[:held.shape[0], held.shape[0]:].T
        PG[held.shape[0]:, held.shape[0]:] = Xn.T @ Xn
        slot[new] = np.arange(held.shape[0], rows)
        self._slot, self._held, self._PG = slot, np.concatenate([held, new]), PG

    def _choose_exact(self, b, keep=None):
        """A round once the pool's Gram is held: its block (drawn from the pool, with
        ``keep`` in it) is solved exactly as one group, with no filter."""
        pool = self._pool
        if pool.shape[0] <= b:
            return self._exact_block(pool[~self.busy[pool]])
        cand = self._draw(min(b, pool.shape[0]), pool)
        cols = np.unique(cand) if keep is None else np.union1d(cand, keep)
        return self._exact_block(cols[~self.busy[cols]])

    def _exact_block(self, cols):
        # (a round in flight at the full round may have moved others)
        if self.remote:
            cols = cols[self._wheld[cols]]
            if cols.shape[0]:
                self._exact = (np.array([0, cols.shape[0]], np.int64), None)
            return cols
        if self._G is None:
            cols = cols[self._slot[cols] >= 0]
        if cols.shape[0]:
            last = self._last_exact
            if last is None or not np.array_equal(last[0], cols):  # (often the whole pool)
                G, pos = (self._G, cols) if self._G is not None else \
                    (self._PG, self._slot[cols])
                last = self._last_exact = (cols, KG.gram_gather(G, pos))
            self._exact = (np.array([0, cols.shape[0]], np.int64), last[1])
        return cols

    def _prepaid(self):
        """PREPAID rounds of the whole block at what the filter may spend on one
        (:meth:`_afford`): counted as spent when X'X or the pool's Gram is priced."""
        return PREPAID * 2 * AFFORD * (self.max_block * self._col_cost + ROUND_COST)

    def _afford(self, work, update):
        """The filter's inner products (``work``) may cost AFFORD times a round's update
        (``update`` + ROUND_COST, multiply-adds): above twice that the block it may fill
        halves, below half it grows back by a quarter (its checks cost O(block^2 n)
        against the updates' O(block n))."""
        cap = self.filter_cap or self.max_block
        update += ROUND_COST
        if work > 2 * AFFORD * update:
            cap = max(1, cap // 2)
        elif 2 * work < AFFORD * update:
            cap = min(self.max_block, cap + max(1, cap // 4))
        self.filter_cap = cap

    def _fill_price(self):
        """Rent or buy: the price of X'X in the filter kernel's multiply-adds (dense: n p^2
        by BLAS at BLAS_SPEEDUP times its speed; sparse: the rows' non-zeros squared; and
        FILL_ENTRY an entry for its decisions), which :meth:`_fill` pays once the filter
        has spent it, pairs met one by one (inf: the cache or X'X does not fit)."""
        p = self.p
        fits = 2 * 8 * -(-p // 64) * p <= FILTER_CACHE_BYTES and (
            self.dense or 8 * p * p <= FILTER_CACHE_BYTES)
        if not fits:
            return np.inf
        if self.dense:
            return p * p * (self.agg.n / BLAS_SPEEDUP + FILL_ENTRY)
        return self._row_squares + p * p * FILL_ENTRY

    def _fill(self):
        """Every pair of the cache from X'X (:func:`groups.fill_cache`), X'X kept when it
        fits (the groups' Gram matrices)."""
        p = self.p
        self._cache()
        self._G = np.empty((p, p)) if 8 * p * p <= FILTER_CACHE_BYTES else None
        X = self.cols[0] if self.dense else self.cols + (self.agg.n,)
        KG.fill_cache(X, self.agg.norms, self.rho, self._known, self._conf, self._G)
        self._filled, self.filter_cap = True, None  # (pairs are free now)
        self._last_exact = None  # (its Gram from X'X from now on)

    def _cache(self):
        """The filter's cache of decisions (dense X; sparse X once :meth:`_fill` buys it),
        made at the first round (and again after a resume: it is not state)."""
        if self._known is None:
            self._filled, self._G = False, None
            words = -(-self.p // 64)
            if 2 * 8 * words * self.p > FILTER_CACHE_BYTES:
                return False
            self._known = np.zeros((self.p, words), dtype=np.uint64)
            self._conf = np.zeros((self.p, words), dtype=np.uint64)
        return True


def _warmup():
    """Load the kernels priority's scheduler and aggregate call (numba's cache) before the
    clock starts, as the workers' ``warmup`` does theirs: else a fresh process's first
    block round pays for it, which round-robin's and random's do not."""
    one, i = np.ones(1), np.zeros(1, np.int64)
    tree = K.tree_build(one)
    K.tree_set(tree, i, one)
    K.priority_candidates(tree, np.zeros(2), 1, 1, 1, np.zeros(1, np.bool_), i.copy())
    KG.group_steps(np.zeros(2), np.arange(2), np.array([0, 2]), np.zeros(2), np.ones(2),
                   np.eye(2).ravel(), 1.0, 1.0, np.empty(2), KG.GROUP_RTOL, KG.GROUP_PASSES)
    KG.gram_gather(np.eye(1), i)
    KG.group_gram_lower(np.eye(1), i, np.array([0, 1]), one)


def filter_rho(rho, n_samples):
    """The filter's threshold: ``rho``, or the larger of RHO and 2/sqrt(n), two standard
    deviations of independent columns' sample correlation (below it: noise)."""
    return float(rho) if rho is not None else max(RHO, 2 / np.sqrt(max(n_samples, 1)))


class ShuffledPriority(Priority):
    """The logistic loss's priority schedule: a binomial share of the candidates drawn by
    priority, the rest uniform, shuffled; no early full rounds, no step halved with the
    block, no filter cache nor X'X."""
    damp_with_block = merge_on_rise = exact_pool = plain_rounds = stale_gram = False

    _refresh_due = _Jacobi._refresh_due

    def _cache(self):
        return False

    def _fill_price(self):
        return np.inf

    def candidates(self, b):
        n_cand = 5 * b // 4
        cand = np.empty(n_cand, dtype=np.int64)
        tree = self.agg.tree
        n_prio = self.rng.binomial(n_cand, 1 - self.floor) if tree[1] > 0 else 0
        n_prio = K.tree_sample_distinct(tree, self.rng.random(n_prio), cand, self.seen)
        cand[n_prio:] = self.rng.integers(0, self.p, n_cand - n_prio)
        self.rng.shuffle(cand)
        return cand


REFRESH = 0.1  # a full round once the sum tree's mass is below this share of its own
RHO = 0.1
NO_GROUPS = np.empty(0, np.int64)
RANDOM_CHUNK = 1 << 14  # uniforms drawn at a time
FILTER_CACHE_BYTES = 64 << 20  # the dense filter's cache and X'X, at most
AFFORD = 8  # the filter's multiply-adds a round, in rounds' updates (Priority._afford)
ROUND_COST = 50_000  # a round's fixed cost in multiply-adds (the engine's hand-offs)
# X'X's price (Priority._fill_price): BLAS's speed against the filter kernel's, an entry's
# decision in multiply-adds, the rounds of the whole block counted as spent
BLAS_SPEEDUP = 6
FILL_ENTRY = 30
PREPAID = 8
# the sparse filter's step through a row's kept entries (a dependent load) against an
# update's streamed multiply-add, in the filter's budget (Priority._afford)
CHASE = 16


class PlannedWorkingSet(_Clocked):
    """The tasks the aggregate plans (``agg.next``, numbered by ``agg.plans``: each taken
    once): full round, then prox-Newton steps on a working set. One round is in flight
    at a time: with a staleness the schedule sends empty rounds while it waits."""

    _plans_taken = 0

    def __init__(self, agg, block=256, staleness=0):
        self._init(agg, block, None, staleness)  # block: the staleness bound only

    def schedule(self, round):
        agg = self.agg
        self._begin_round(round)
        if agg.exhausted:
            return None
        task = None
        if agg.plans != self._plans_taken and agg.next is not None:
            self._plans_taken = agg.plans
            task = dict(agg.next)
        if task is None:
            task = {"kind": "wait"}
        task["version"] = agg.done
        return self._attach_dual(task)


#: the schedules by name (a datafit may replace priority's class; working-set is the
#: datafit's own: ``Datafit.working_set``)
SCHEDULES = {"working-set": None, "priority": Priority, "round-robin": RoundRobin,
             "random": Random}
