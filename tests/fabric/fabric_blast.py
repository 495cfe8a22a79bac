"""Loads every link of a fabric at once with TCP and reports achieved/set rate.

How it works: `blast(plan, seconds)` starts one worker process per node
namespace (`ip netns exec NS python3 fabric_blast.py worker SPEC`). For
every link and each direction, the receiving end runs a sink thread (a TCP
listener on its link address) and the sending end a source thread that
connects to the peer's address on that same link (a connected /30, so the
bytes cross exactly that veth and its rate limit) and writes as fast as the
socket takes. All workers share one start time; after a warm-up each sink
counts the bytes it receives in the measuring window and prints them as
JSON. The result is, per link direction, MB/s achieved against MB/s set.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time

kPort = 5201
kWarmSec = 1.0
kChunk = 1 << 20


def _sink(addr, port, start, seconds, out, key):
    """Accepts one stream and counts the bytes received in the measuring window."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr, port))
    ls.listen(1)
    ls.settimeout(start + kWarmSec + seconds + 10 - time.time())
    conn, _ = ls.accept()
    conn.settimeout(5)
    buf = bytearray(kChunk)
    t0, t1 = start + kWarmSec, start + kWarmSec + seconds
    counted = 0
    while True:
        now = time.time()
        if now >= t1:
            break
        try:
            n = conn.recv_into(buf)
        except socket.timeout:
            continue
        if n == 0:
            break
        if now >= t0:
            counted += n
    out[key] = counted
    conn.close()
    ls.close()


def _source(addr, port, start, seconds):
    """Connects and writes until the window (plus a margin) is over."""
    end = start + kWarmSec + seconds + 0.5
    data = b"\0" * kChunk
    for _ in range(100):
        try:
            s = socket.create_connection((addr, port), timeout=2)
            break
        except OSError:
            time.sleep(0.05)
    else:
        return
    s.settimeout(2)
    while time.time() < end:
        try:
            s.send(data)
        except socket.timeout:
            continue
        except OSError:
            break
    s.close()


def worker(spec):
    """Runs inside one namespace: the sinks and sources of `spec`; prints {key: bytes}."""
    out, threads = {}, []
    for key, addr, port in spec["sinks"]:
        threads.append(threading.Thread(target=_sink, args=(addr, port, spec["start"], spec["seconds"], out, key)))
    for addr, port in spec["sources"]:
        threads.append(threading.Thread(target=_source, args=(addr, port, spec["start"], spec["seconds"])))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(out))


def blast(plan, seconds=4.0, links=None):
    """[(link label, direction, set MB/s, achieved MB/s)] with every chosen link loaded at once."""
    chosen = plan["links"] if links is None else links
    start = time.time() + 1.0 + 0.05 * len(plan["nodes"])
    specs = {n: {"sinks": [], "sources": [], "start": start, "seconds": seconds} for n in plan["nodes"]}
    meta = {}
    for i, l in enumerate(chosen):
        for src, dst in (("a", "b"), ("b", "a")):
            key = f"{i}{src}"
            specs[l[dst]]["sinks"].append([key, l["addr_" + dst], kPort + i])
            specs[l[src]]["sources"].append([l["addr_" + dst], kPort + i])
            meta[key] = (f"{l['a']}-{l['b']}", f"{l[src]}->{l[dst]}", l["mbps"])
    procs = []
    for n, spec in specs.items():
        if spec["sinks"] or spec["sources"]:
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", plan["nodes"][n]["ns"], sys.executable,
                 os.path.abspath(__file__), "worker", json.dumps(spec)],
                stdout=subprocess.PIPE, text=True))
    got = {}
    for p in procs:
        text, _ = p.communicate(timeout=seconds + 60)
        if text.strip():
            got.update(json.loads(text.strip().splitlines()[-1]))
    return [(meta[k][0], meta[k][1], meta[k][2], got.get(k, 0) / seconds / 1e6) for k in sorted(meta)]


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "worker":
        worker(json.loads(sys.argv[2]))
    else:
        sys.exit("usage: fabric_blast.py worker SPEC (started by 'fabric blast')")
