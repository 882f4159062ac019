"""Elastic runs: ``python -m strads.launch -n N [options] APP [APP ARGS]``; the restarts,
and how a lost rank is found: docs/elastic.md, "The launcher"."""
import argparse
import contextlib
import fcntl
import glob
import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ENV = "STRADS_LAUNCH"  # the folder of the heartbeat files, set by the launcher
BEAT = 0.2  # seconds between a rank's heartbeats
_PIDFD = hasattr(os, "pidfd_open")  # Linux >= 5.3: wait for a process that is no child
STALE = 10.0  # a heartbeat this old, on another host: that rank is gone
PROG = "strads.launch"
APP_CODES = (1, 2, 3, 130, 143)  # the app's own: an error, bad input, diverged, SIGINT/TERM
SOCK = "ranks.sock"  # where the ranks of the launcher's host connect
KILLED = (9, 137, -9)  # what mpiexec returns when a rank was killed

# -- rank side -----------------------------------------------------------------------------
_beat = {"round": 0}
_started = False


def note_round(done):
    """The driver's rounds so far (rank 0's heartbeat tells the launcher); the first
    after going on in place completes that recovery's record and line."""
    _beat["round"] = int(done)
    if _event:
        e = dict(_event)
        _event.clear()
        e["recovery_s"] = round(time.perf_counter() - e.pop("t0"), 3)
        recoveries.append(e)
        who = ", ".join(map(str, e["lost_ranks"]))
        where = (f"from the checkpoint of round {e['resumed_from_round']}"
                 if e["resumed_from_round"] is not None else "from the start")
        sys.stderr.write(f"[{e.pop('label')}] rank{'s' * (len(e['lost_ranks']) > 1)} {who} "
                         f"lost at round {e['round']}; went on in place (ULFM) {where} on "
                         f"{e['ranks']} ranks in {e['recovery_s']:.2f} s\n")
        sys.stderr.flush()


# -- in place, with ULFM -------------------------------------------------------------------
recoveries = []  # this run's, for summary.json: rank 0's record of each
_event = {}  # a recovery whose record waits for the first round after it (rank 0)


def recover(comm, tp, kw):
    """A survivor's part in going on in place after a lost rank (ULFM, docs/elastic.md):
    -> (the survivors' communicator, whether to resume from a checkpoint)."""
    from . import transport

    t0 = time.perf_counter()
    if tp is not None:
        tp.revoke()
    comm, lost, reached, at = transport.shrink(
        comm, max(_beat["round"], getattr(tp, "round", 0)),
        lambda: _checkpoint_round(kw["out"]) if kw["out"] else None)
    if comm.Get_rank() == 0:
        _event.update(lost_ranks=lost, round=reached, resumed_from_round=at,
                      ranks=comm.Get_size(), t0=t0, label=kw["label"])
    return comm, at is not None


def heartbeat():
    """Under the launcher: write this rank's heartbeat every BEAT seconds (a daemon
    thread); elsewhere nothing."""
    from .cli import launched_rank

    global _started
    folder, rank = os.environ.get(ENV), launched_rank()
    if _started or not folder:
        return
    _started = True
    path = os.path.join(folder, f"rank-{rank}.json")
    me = {"rank": rank, "pid": os.getpid(), "host": socket.gethostname()}

    def beat():
        while True:
            try:
                with open(path + ".tmp", "w") as f:
                    json.dump({**me, "round": _beat["round"], "time": time.time()}, f)
                os.replace(path + ".tmp", path)
            except OSError:
                return  # the launcher's folder is gone: it is not watching any more
            time.sleep(BEAT)

    # connections to the launcher at both ends of the file table: one closes before MPICH
    # hears of the death (docs/elastic.md, "How the lost rank is found")
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = (1 << 16) if soft == resource.RLIM_INFINITY else min(soft, 1 << 16)
    for place in (lambda fd: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top - 1),
                  lambda fd: os.dup2(fd, 0)):  # (no app reads stdin)
        # (OSError: another host, no launcher listening, or that descriptor taken: pidfd)
        with contextlib.suppress(OSError):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(os.path.join(folder, SOCK))
                fd = place(conn.fileno())
            # named once in place: a connection closed before it names its rank is none
            os.write(fd, f"{rank}\n".encode())
    threading.Thread(target=beat, name="strads-heartbeat", daemon=True).start()


# -- launcher side -------------------------------------------------------------------------
def _flag(args, name):
    """The value of ``name`` in an argument list (``--out DIR`` or ``--out=DIR``)."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None


def _hosts(path):
    """[(host, slots)] of a hostfile (hydra's 'host' or 'host:slots' lines); ValueError
    (or OSError) says what is wrong with it."""
    out = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if line:
                host, _, slots = line.partition(":")
                if slots.strip() and not (slots.strip().isdigit() and int(slots) > 0):
                    raise ValueError(f"line {n}: slots {slots.strip()!r} are not a count > 0")
                out.append((host.strip(), int(slots) if slots.strip() else 1))
    if not out:
        raise ValueError("no hosts")
    return out


def _short(host):
    host = host.lower()
    return host if host.replace(".", "").isdigit() else host.split(".")[0]


def _same_host(a, b):
    """Whether a hostfile's name and a rank's hostname are one host: the same short
    name (node1, node1.cluster), or both this host (localhost, 127.0.0.1)."""
    here = {"localhost", "127.0.0.1", _short(socket.gethostname())}
    return _short(a) == _short(b) or {_short(a), _short(b)} <= here


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is gone too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def _read_beats(folder):
    beats = {}
    for path in glob.glob(os.path.join(folder, "rank-*.json")):
        with contextlib.suppress(OSError, ValueError, KeyError):
            with open(path) as f:
                b = json.load(f)
            beats[int(b["rank"])] = {**b, "mtime": os.path.getmtime(path)}
    return beats


def _first_lost(beats, here, local=True):
    """The rank that is gone while its job runs (None: all alive as far as we can tell);
    ``local``: this host's ranks too (where no pidfd waits for them)."""
    now = time.time()
    for rank, b in sorted(beats.items()):
        if b["host"] == here:
            if local and not _alive(b["pid"]):
                return rank
        elif now - b["mtime"] > STALE:
            return rank
    return None


def _shm():
    return set(glob.glob("/dev/shm/mpich_shm_*")) if os.path.isdir("/dev/shm") else set()


def mapped_shm(maps="/proc/[0-9]*/maps"):
    """The MPICH shared-memory files that the processes of ``maps`` (default: every live
    one) map."""
    out = set()
    for path in glob.glob(maps):
        with contextlib.suppress(OSError, IndexError):
            with open(path) as f:
                out.update(line.split(None, 5)[5].strip() for line in f
                           if "/dev/shm/mpich_shm_" in line)
    return out


class _Terminated(Exception):
    """SIGTERM to the launcher (passed on to the job, as SIGINT is)."""


def _terminated(signum, frame):
    raise _Terminated


def _run_once(cmd, folder, env, resumed=None):
    """Run one mpiexec job; returns (exit status, lost rank's heartbeat or None, the
    round rank 0 had reached, when its heartbeat first showed a round past ``resumed``).
    How the ranks are watched: docs/elastic.md, "How the lost rank is found"."""
    before = _shm()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock_path = os.path.join(folder, SOCK)
    if os.path.lexists(sock_path):
        os.unlink(sock_path)
    # epoll, not poll: its ready list keeps the order the closes came in
    watch, fds, conns = select.epoll(), {}, {}
    with contextlib.suppress(OSError):
        listener.bind(sock_path)  # (a path over the socket name limit: pidfds alone)
        listener.listen(1024)
        watch.register(listener.fileno(), select.POLLIN)
    # its own process group: a terminal's Ctrl-C reaches the launcher alone, which passes
    # it on once (a second SIGINT makes mpiexec abort the job without its outputs)
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, preexec_fn=os.setpgrp)
    lost, here, beats, read_at, went_on = None, socket.gethostname(), {}, 0.0, None
    try:
        while proc.poll() is None:
            if time.monotonic() - read_at > BEAT / 2:
                beats, read_at = _read_beats(folder), time.monotonic()
                if went_on is None and (beats.get(0) or {}).get("round", 0) > (resumed or 0):
                    went_on = read_at
                for rank, b in beats.items():  # this host's ranks, once each
                    if (b["host"] == here and rank not in fds.values() and _PIDFD
                            and all(r != rank for r, _ in conns.values())):
                        try:
                            fd = os.pidfd_open(b["pid"])
                        except OSError:  # gone already
                            continue
                        fds[fd] = rank
                        watch.register(fd, select.POLLIN)
            ended = []
            for fd, _ in watch.poll(0.02):
                if fd == listener.fileno():  # a rank connects: it names itself
                    conn, _ = listener.accept()
                    conn.settimeout(5)
                    try:
                        rank = int(conn.recv(64).decode().strip())
                    except (OSError, ValueError):
                        conn.close()
                        continue
                    conns[conn.fileno()] = (rank, conn)
                    watch.register(conn.fileno(), select.POLLIN | select.POLLHUP)
                    for pfd in [k for k, r in fds.items() if r == rank]:
                        # its connection's close tells first (OSError: its other came first)
                        with contextlib.suppress(OSError):
                            watch.unregister(pfd)
                elif fd in conns:
                    ended.append(conns[fd][0])
                    watch.unregister(fd)
                else:
                    ended.append(fds[fd])
            if lost is None:
                k = ended[0] if ended else _first_lost(beats, here, local=not _PIDFD)
                if k is not None:
                    beats = _read_beats(folder)  # rank 0's round now
                    lost = {**beats.get(k, {"rank": k, "pid": None, "host": here,
                                            "round": 0}), "t": time.monotonic()}
    except KeyboardInterrupt:  # the user's: pass it on; the job stops at a round
        proc.send_signal(signal.SIGINT)
        proc.wait()
        return proc.returncode, None, 0, None
    except _Terminated:  # the same for SIGTERM (mpiexec does not pass it on: this host's
        # ranks get it from their heartbeats' pids): the job stops at a round
        for b in _read_beats(folder).values():
            if b["host"] == here and b.get("pid"):
                with contextlib.suppress(OSError):
                    os.kill(b["pid"], signal.SIGTERM)
        proc.wait()
        return proc.returncode, None, 0, None
    finally:
        for fd in fds:
            os.close(fd)
        for _, conn in conns.values():
            conn.close()
        listener.close()
        watch.close()
    # a job killed with some of its ranks leaves MPICH's shared-memory files behind
    # (those another job still maps are its own)
    if proc.returncode != 0:
        from .outputs import unlink

        unlink(_shm() - before - mapped_shm())
    last_round = (beats.get(0) or {}).get("round", 0)
    if lost is not None and lost["rank"] == 0:
        last_round = lost["round"]
    return proc.returncode, lost, last_round, went_on


def _manifests(out):
    """The checkpoint manifests in ``out`` (the run's, then those of runs it holds in
    folders: MF's validation run) -> their bytes, by path."""
    paths = [os.path.join(out, "checkpoint", "manifest.json")] + sorted(
        glob.glob(os.path.join(glob.escape(out), "*", "checkpoint", "manifest.json")))
    found = {}
    for path in paths:
        with contextlib.suppress(OSError):
            with open(path, "rb") as f:
                found[path] = f.read()
    return found


def _checkpoint_round(out, earlier=None):
    """The round of the first checkpoint in ``out`` (:func:`_manifests`) that is not
    ``earlier``'s (their bytes before this run: an earlier run's); None if none."""
    from .outputs import read_json

    for path, data in _manifests(out).items():
        if (earlier or {}).get(path) == data:
            continue
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            return int(read_json(path)["round"])
    return None


def _record(out, restarts):
    """Add the restarts to the run's summary.json (in one step)."""
    path = os.path.join(out, "summary.json")
    from .outputs import read_json

    try:
        summary = read_json(path)
    except (OSError, ValueError):
        return
    if not isinstance(summary, dict):
        return
    summary["restarts"] = restarts
    with open(path + ".tmp", "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)


def _say(msg):
    sys.stderr.write(f"{PROG}: {msg}\n")
    sys.stderr.flush()


def _runnable(app, script):
    """Whether the ranks' ``python APP`` (``script``) or ``python -m APP`` finds it (the
    same Python, folder and environment as the launcher's)."""
    if script:
        return os.path.isfile(app)
    import importlib.util

    try:
        spec = importlib.util.find_spec(app)
        if spec is not None and spec.submodule_search_locations is not None:
            spec = importlib.util.find_spec(app + ".__main__")  # a package runs its __main__
    except (ImportError, ValueError):  # (a parent package missing; an empty name part)
        return False
    return spec is not None


def main(argv=None):
    p = argparse.ArgumentParser(
        prog=f"python -m {PROG}",
        description="Run a strads app under mpiexec and keep it going when ranks are lost: "
                    "the job restarts from its last complete checkpoint on the ranks that "
                    "remain. The app needs --out and --checkpoint-every.",
        epilog="Example: python -m strads.launch -n 4 strads.apps.lasso --data X.svm "
               "--out run --checkpoint-every 30")
    p.add_argument("-n", type=int, required=True, metavar="N", help="ranks to start with")
    p.add_argument("--min-ranks", type=int, default=None, metavar="M",
                   help="stop instead of restarting below this many ranks (default: 2)")
    p.add_argument("--max-restarts", type=int, default=3, metavar="R",
                   help="restarts at most (default: 3; 0: none, the app then needs no "
                        "--out: the launcher only names a rank that died)")
    p.add_argument("--hostfile", metavar="F",
                   help="hosts for mpiexec (lines 'host' or 'host:slots'); a lost rank's "
                        "host is left out of the restarts")
    p.add_argument("--mpiexec", default=None, metavar="PATH",
                   help="the mpiexec to use (default: the one beside this Python, else "
                        "on PATH)")
    p.add_argument("app", metavar="APP", help="a module (strads.apps.lasso) or a script path")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the app's own flags (with --out DIR and --checkpoint-every S)")
    a = p.parse_args(argv)
    args = list(a.args)
    out, every = _flag(args, "--out"), _flag(args, "--checkpoint-every")
    given, a.min_ranks = a.min_ranks is not None, 2 if a.min_ranks is None else a.min_ranks
    if a.n < 1 or a.min_ranks < 1 or a.max_restarts < 0:
        p.error("-n and --min-ranks must be >= 1, --max-restarts >= 0")
    if a.max_restarts and (out is None or every is None):
        p.error("the app needs --out DIR and --checkpoint-every SECONDS: a restart goes on "
                "from the last checkpoint (or --max-restarts 0: only say which rank died)")
    try:
        hosts = _hosts(a.hostfile) if a.hostfile else None
    except (OSError, ValueError) as e:
        p.error(f"--hostfile {a.hostfile}: {getattr(e, 'strerror', None) or e}")
    start = min(a.n, sum(s for _, s in hosts)) if hosts else a.n
    if given and a.min_ranks > start:  # (the default's 2 allows -n 1: it never restarts)
        p.error(f"--min-ranks {a.min_ranks} is more than the {start} ranks the job starts "
                "with")
    script = a.app.endswith(".py") or os.sep in a.app
    if not _runnable(a.app, script):  # here, once: not a line from every rank
        p.error(f"APP {a.app}: " + ("no such file" if script else "no module to run by "
                                    "that name (a module such as strads.apps.lasso, or a "
                                    "script path)"))
    app = [sys.executable, a.app] if script else [sys.executable, "-m", a.app]
    ranks, restarts, t0, t_lost = a.n, [], time.time(), None
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    mpiexec = shutil.which(a.mpiexec or (beside if os.path.exists(beside) else "mpiexec"))
    if mpiexec is None:
        p.error(f"--mpiexec {a.mpiexec}: no such executable" if a.mpiexec else
                f"no mpiexec beside this Python ({beside}) or on PATH: give --mpiexec PATH")
    # a checkpoint in --out from before this run is no restart's (unless it resumes)
    earlier = None if out is None or "--resume" in args else _manifests(out)
    folder = tempfile.mkdtemp(prefix="strads-launch-")
    signal.signal(signal.SIGTERM, _terminated)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # (passed on to the job)
    try:
        while True:
            for path in glob.glob(os.path.join(folder, "*")):
                os.unlink(path)
            cmd = [mpiexec]
            if hosts is not None:
                hostfile = os.path.join(folder, "hosts")
                with open(hostfile, "w") as f:
                    f.writelines(f"{h}:{s}\n" for h, s in hosts)
                ranks = min(ranks, sum(s for _, s in hosts))
                cmd += ["-f", hostfile]
            cmd += ["-n", str(ranks), *app, *args]
            code, lost, at, went_on = _run_once(cmd, folder, {**os.environ, ENV: folder},
                                                restarts[-1]["resumed_from_round"]
                                                if restarts else None)
            if t_lost is not None and went_on is not None:
                # from the loss seen to the first round after it (heartbeats: +0.3 s at most)
                restarts[-1]["recovery_s"] = round(went_on - t_lost, 3)
            t_lost = None
            if code == 0:
                if restarts:
                    _record(out, restarts)
                return 0
            if code in APP_CODES or (lost is None and code not in KILLED):
                return code  # the app stopped by itself (bad input, an error, a signal)
            who = (f"rank {lost['rank']} (pid {lost['pid']} on {lost['host']})" if lost
                   else "a rank")
            resume = _checkpoint_round(out, earlier) if out else None
            # rank 0's heartbeat is up to BEAT old: the round reached is at least the
            # checkpoint's
            at = max(at, resume or 0)
            if hosts is not None and lost is not None:
                hosts = [(h, s) for h, s in hosts if not _same_host(h, lost["host"])]
                left = sum(s for _, s in hosts)
            else:
                left = ranks - 1
            if len(restarts) >= a.max_restarts or left < a.min_ranks:
                why = ("--max-restarts 0" if not a.max_restarts else
                       f"{a.max_restarts} restarts done" if len(restarts) >= a.max_restarts
                       else f"{left} ranks left, fewer than --min-ranks {a.min_ranks}")
                _say(f"{who} lost at round {at}; not restarting ({why})")
                return code
            restarts.append({"lost_rank": lost["rank"] if lost else None,
                             "host": lost["host"] if lost else None, "round": at,
                             "resumed_from_round": resume, "ranks": left,
                             "at_s": round(time.time() - t0, 3)})
            t_lost = lost["t"] if lost else time.monotonic()
            if resume is not None and "--resume" not in args:
                args.append("--resume")
            where = (f"from the checkpoint of round {resume}" if resume is not None
                     else "from the start (no checkpoint yet)")
            _say(f"{who} lost at round {at}; going on {where} on {left} "
                 f"rank{'s' if left != 1 else ''} (restart {len(restarts)} of at most "
                 f"{a.max_restarts})")
            ranks = left
    except _Terminated:  # between two jobs
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
