"""``--rebalance``'s rule: from the workers' measured seconds of work, the rows each
should hold (:func:`plan`), and the moves between neighbours that get them there
(:func:`steps`). The measuring and moving: driver.py and worker.py; the rule in words:
docs/architecture.md ("Load balance")."""
import numpy as np

FIRST_REBALANCE = 5  # the first measurement's round; then after as many as the run has had
MOVE_ROUNDS = 2.0  # a row's move, in rounds of its work, until a move has been timed
KEEP = 4  # the measurements a plan fits (older ones describe a load that may have gone)


def fit(seen):
    """Per-worker speeds ``s`` and the rows' fixed cost ``kappa`` of the model ``seconds a
    round = s[w] * (kappa + rows[w])``, fitted to ``seen``, [(rows, seconds a round)] per
    measurement (why this fit: docs/architecture.md, "Load balance")."""
    R = np.array([m[0] for m in seen], np.float64)
    T = np.array([m[1] for m in seen], np.float64)
    fits = []
    for kappa in np.concatenate([[0.0], R.mean() * 2.0 ** np.arange(-6, 7)]):
        logs = np.log(T / (kappa + R))
        log_s = np.median(logs, axis=0)
        fits.append((float(((logs - log_s) ** 2).sum()), kappa, np.exp(log_s)))
    best = min(fits[1:], key=lambda f: f[0])
    if best[0] >= fits[0][0] / 2 - 1e-9:  # not clearly better (or all fit: one layout)
        best = fits[0]
    return best[2], best[1]


def plan(seen, ahead=None, moved=None, balanced=1.1):
    """New rows per worker from the measurements ``seen`` (the last one's rows are those
    held now), or None when nothing should move: the rounds within ``balanced``, a worker
    idle, or a move that would not pay over the ``ahead`` rounds to come (None: no
    limit). ``moved``: the last move's (seconds, rows that crossed a cut)."""
    rows, t = (np.asarray(x, np.float64) for x in seen[-1][:2])
    if len(rows) < 2 or (t <= 0).any() or t.max() <= balanced * t.min():
        return None
    s, kappa = fit(seen[-KEEP:])
    now = s * (kappa + rows)
    level = (rows.sum() + len(rows) * kappa) / (1 / s).sum()  # every round this long
    share = np.maximum(level / s - kappa, 0.0)
    cuts = np.round(np.concatenate([[0.0], np.cumsum(rows.sum() * share / share.sum())]))
    cuts = cuts.astype(np.int64)
    for k in range(1, len(rows)):  # every worker keeps a row
        cuts[k] = min(max(cuts[k], cuts[k - 1] + 1), rows.sum() - (len(rows) - k))
    new = np.diff(cuts)
    after = s * (kappa + new)
    if (new == rows).all() or after.max() * balanced > now.max():  # (measurements are noisy)
        return None
    if ahead is not None:
        crossed = np.abs(cuts - np.concatenate([[0], np.cumsum(rows)])).sum()
        if moved is None:
            cost = crossed * MOVE_ROUNDS * now.sum() / rows.sum()
        else:
            cost = moved[0] * max(1.0, crossed / max(moved[1], 1))
        if (now.max() - after.max()) * ahead <= 2 * cost:  # a clear gain only
            return None
    return [int(x) for x in new]


def steps(rows, new):
    """From ``rows`` to ``new`` rows per worker in moves that each keep every cut
    within its neighbours' ranges (what worker.rebalance does): rows that go past a
    neighbour pass through it."""
    old = np.concatenate([[0], np.cumsum(rows)])
    goal = np.concatenate([[0], np.cumsum(new)])
    while (old != goal).any():
        cuts = old.copy()
        for k in range(1, len(rows)):
            cuts[k] = min(max(goal[k], old[k - 1] + 1, cuts[k - 1] + 1), old[k + 1] - 1)
        yield [int(x) for x in np.diff(old)], [int(x) for x in np.diff(cuts)]
        old = cuts
