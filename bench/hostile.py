"""Honest clients' PING, GET and SAVE latencies, first alone, then while hostile clients pin the
pool, flood the loop and fan out: clients that ask for everything and never read, runaway
regular expressions, SAVEs queued on a row lock, lines of 40,000 pairs and deep predicates, and
200 watchers that never read while 100,000 watched rows change. Prints p50/p99 in ms and the
answers that did not come within 10 s. Bounded: two phases of PHASE seconds."""
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time

from client import Client, rss_kib

PORT = int(os.environ["RECORDSD_PORT"])
PID = int(os.environ["RECORDSD_PID"])
PGURL = os.environ["PGURL"]
PHASE = float(os.environ.get("HOSTILE_SECONDS", "15"))
LABEL = os.environ.get("HOSTILE_LABEL", "recordsd")


def psql(sql):
    return subprocess.run(["psql", PGURL, "-tAXc", sql], check=True, capture_output=True, text=True).stdout.strip()


def honest(kind, stop, latencies, failures):
    try:
        client = Client(PORT)
        client.sock.settimeout(10)
    except OSError:
        failures[kind] += 1
        return
    while not stop.is_set():
        started = time.monotonic()
        status = "no answer"
        try:
            if kind == "PING":
                _, status = client.send("PING")
            elif kind == "GET":
                _, status = client.send(f"GET employee {random.randint(1, 100000)}")
            else:
                client.send(f'INSERT game name="h-{random.getrandbits(60)}"')
                _, status = client.send("SAVE")
            ok = status.startswith("+OK")
        except (OSError, EOFError):
            ok = False
            try:
                client = Client(PORT)
                client.sock.settimeout(10)
            except OSError:
                pass
        elapsed = (time.monotonic() - started) * 1000
        if ok:
            latencies[kind].append(elapsed)
        else:
            failures[kind] += 1
            if failures[kind] == 1:
                print(f"{LABEL:10s} first {kind} failure: {status}", file=sys.stderr, flush=True)
        time.sleep(0.02)


def raw(lines, read=False):
    """A client that sends `lines` and never reads (unless `read`)."""
    s = socket.create_connection(("127.0.0.1", PORT))
    s.sendall("".join(line + "\n" for line in lines).encode())
    return s


def hostile(stop, held):
    # Pinners: everything asked for, nothing read.
    for _ in range(4):
        held.append(raw(["FIND employee"]))
    for _ in range(2):
        held.append(raw(["EXPORT employee"]))
    # Runaway regular expressions, again and again.
    pattern = r'COUNT memo WHERE body MATCHES "((a+)\\2)+b"'
    for _ in range(2):
        held.append(raw([pattern] * 20))
    # SAVEs queued on a row another transaction holds.
    locker = subprocess.Popen(["psql", PGURL, "-tAXc", "BEGIN; SELECT * FROM game WHERE id = 1 FOR UPDATE; SELECT pg_sleep(%d); COMMIT" % int(PHASE + 5)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    for _ in range(8):
        held.append(raw(['UPDATE game 1 name="locked"', "SAVE"] * 5))
    # Watchers that never read, and a change of 100,000 watched rows now and then.
    for _ in range(200):
        held.append(raw(["WATCH employee"]))
    pairs = " ".join(f"a{i}=1" for i in range(40_000))
    deep = "FIND employee WHERE " + "(" * 2000 + "age == 1" + ")" * 2000
    flood = [socket.create_connection(("127.0.0.1", PORT)) for _ in range(4)]
    held.extend(flood)
    rounds = 0
    while not stop.is_set():
        for s in flood:
            try:
                s.sendall(("INSERT game " + pairs + "\n" + deep + "\n").encode())
                s.setblocking(False)
                try:
                    while s.recv(1 << 16):
                        pass
                except (BlockingIOError, OSError):
                    pass
                s.setblocking(True)
            except OSError:
                pass
        if rounds % 10 == 0:
            psql("UPDATE employee SET age = coalesce(age, 0) + 1 WHERE id <= 100000")
        rounds += 1
        time.sleep(0.2)
    locker.wait()


def phase(name, with_hostile):
    stop = threading.Event()
    latencies = {"PING": [], "GET": [], "SAVE": []}
    failures = {"PING": 0, "GET": 0, "SAVE": 0}
    held = []
    attacker = None
    # The honest clients are the server's users already: they work a second before the attack.
    threads = [threading.Thread(target=honest, args=(kind, stop, latencies, failures)) for kind in latencies]
    for t in threads:
        t.start()
    time.sleep(1)
    for kind in latencies:  # counted from here on
        latencies[kind].clear()
        failures[kind] = 0
    if with_hostile:
        attacker = threading.Thread(target=hostile, args=(stop, held))
        attacker.start()
    peak = 0
    deadline = time.monotonic() + PHASE
    while time.monotonic() < deadline:
        peak = max(peak, rss_kib(PID))
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    if attacker:
        attacker.join(timeout=60)
    for s in held:
        try:
            s.close()
        except OSError:
            pass
    cells = []
    for kind in ("PING", "GET", "SAVE"):
        values = sorted(latencies[kind])
        if values:
            p50 = statistics.median(values)
            p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
            cells.append(f"{kind} p50 {p50:8.1f} p99 {p99:8.1f} n {len(values):5d} failed {failures[kind]:3d}")
        else:
            cells.append(f"{kind} no answer, failed {failures[kind]}")
    print(f"{LABEL:10s} {name:8s} " + " | ".join(cells) + f" | peak {peak / 1024:.0f} MiB", flush=True)


def main():
    psql("TRUNCATE employee, department, game, memo RESTART IDENTITY CASCADE")
    psql("INSERT INTO employee (first_name, last_name, gender, age) SELECT 'f' || i, repeat('x', 200), 1, 30 FROM generate_series(1, 200000) i")
    psql("INSERT INTO memo (uid, body) SELECT 'm' || i, repeat('a', 51) || 'b' FROM generate_series(1, 3) i")
    psql("INSERT INTO game (name) VALUES ('locked-row')")  # id 1, from the sequence
    phase("alone", False)
    phase("hostile", True)
    time.sleep(2)
    try:
        _, status = Client(PORT).send("PING")
        print(f"{LABEL:10s} after    PING {status}")
    except OSError as error:
        print(f"{LABEL:10s} after    no answer: {error}")


if __name__ == "__main__":
    main()
