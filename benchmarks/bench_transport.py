"""Round trips through the MPI transport: the scheduler sends one message to every worker
and waits for each one's small reply: directly to each (``--direct``), or as an engine round
does, down the workers' tree and back up it, combined (default). Method and figures:
docs/benchmarks.md."""
import argparse
import time

import numpy as np

from strads import transport
from strads.io import memory


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bytes", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--direct", action="store_true",
                    help="one message to each worker, each one's reply (no tree)")
    ap.add_argument("--no-doorbells", action="store_true",
                    help="poll instead of sleeping on doorbells")
    a = ap.parse_args()

    def combine(parts):
        return [x for p in parts for x in p]
    memory.keep_freed_memory()  # as strads.run does
    tp = transport.MPITransport(doorbell=not a.no_doorbells)
    x = np.random.default_rng(0).random(max(a.bytes // 8, 1))
    if tp.rank == 0:
        for w in range(tp.n_workers):  # one round to set up the connections
            tp.send(w, ("x", x))
            tp.recv(w)
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.rounds):
            if a.direct:
                for w in range(tp.n_workers):
                    tp.send(w, ("x", x))
                for w in range(tp.n_workers):
                    tp.recv(w)
            else:
                tp.broadcast(("x", x))
                tp.gather(combine)
        wall = (time.perf_counter() - t0) / a.rounds
        cpu = (time.process_time() - c0) / a.rounds
        print(f"{'direct' if a.direct else 'tree'}, doorbells "
              f"{'on' if tp._waiter.doorbells else 'off'}: {x.nbytes} B to "
              f"{tp.n_workers} workers and back: {wall * 1e6:.0f} us a round, scheduler "
              f"CPU {cpu * 1e6:.0f} us a round")
    else:
        tp.recv_task()
        tp.reply(("ok",))
        for _ in range(a.rounds):
            if a.direct:
                tp.recv_task()
                tp.reply(("ok",))
            else:
                tp.recv_broadcast()
                tp.reply_gathered([("ok", tp.worker)], combine)
    tp.close()


if __name__ == "__main__":
    main()
