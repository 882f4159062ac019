"""A fork server for the tests' ``python -m <module> ...`` runs (conftest.run_cli): each run
is a child forked from a process that has imported strads' apps and loaded their kernels
once, instead of a fresh interpreter that does both again (about a second a run). The
child is still a process of its own: its own stdout, stderr, exit status, environment,
working folder and limits.

``python cli_server.py SOCKET``: serves one client at a time on a Unix socket; a request
is JSON (argv, env, cwd, rlimit_as) with the child's stdout and stderr as two file
descriptors; the answers are the child's pid, then its return code (negative: a signal).
"""
import atexit
import io
import json
import os
import resource
import runpy
import signal
import socket
import sys
import threading
import traceback


def preload():
    import importlib

    from strads import api
    for app in ("lasso", "logreg", "mf", "lda"):
        importlib.import_module(f"strads.apps.{app}.__main__")
        del sys.modules[f"strads.apps.{app}.__main__"]  # (runpy runs it afresh)
    todo = list(api.Update.__subclasses__())
    while todo:  # every app's Update loads its kernels from numba's cache
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("strads.apps."):
            cls.warmup()


def _stream(fd, like, line_buffering):
    return io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding=like.encoding,
                            errors=like.errors, line_buffering=line_buffering)


def child(req, fds):
    """Run ``python -m argv...`` here, as that interpreter would, and exit."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        for fd, to in ((null, 0), (fds[0], 1), (fds[1], 2)):
            os.dup2(fd, to)
            os.close(fd)
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = sys.__stdout__ = _stream(1, sys.stdout, False)
        sys.stderr = sys.__stderr__ = _stream(2, sys.stderr, True)
        os.chdir(req["cwd"])
        sys.path[0] = os.getcwd()  # `python -m`: the working folder first
        os.environ.clear()
        os.environ.update(req["env"])
        if req["rlimit_as"]:
            resource.setrlimit(resource.RLIMIT_AS,
                               (req["rlimit_as"], resource.RLIM_INFINITY))
        sys.argv = ["-m", *req["argv"][1:]]
        try:
            runpy.run_module(req["argv"][0], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                code = e.code or 0
            else:
                print(e.code, file=sys.stderr)
        except KeyboardInterrupt:  # as the interpreter: killed by SIGINT
            traceback.print_exc()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:  # noqa: BLE001 (as the interpreter: a traceback, exit 1)
            traceback.print_exc()
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        code = 120
    os._exit(code)


def serve(path):
    sys.path[0] = os.getcwd()
    preload()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(path)
    sock.listen(1)
    print("ready", flush=True)
    while True:
        conn, _ = sock.accept()
        with conn:
            msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
            if not msg:
                return
            pid = os.fork()
            if pid == 0:
                sock.close()
                conn.close()
                child(json.loads(msg), fds)
            for fd in fds:
                os.close(fd)
            _answer(conn, pid)
            _answer(conn, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))


def _answer(conn, number):
    try:
        conn.send(str(number).encode())
    except OSError:  # the client went away (it kills a child it leaves)
        pass


if __name__ == "__main__":
    serve(sys.argv[1])
