"""EXPORT and IMPORT of 1,000,000 employees against psql \\copy, and WATCH latency from COMMIT
to the pushed line with 100 watching sessions."""
import os
import selectors
import socket
import statistics
import subprocess
import tempfile
import time

import threading

from client import Client, rss_kib

PGURL = os.environ["PGSOCKETURL"]
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
PID = int(os.environ["RECORDSD_PID"])
PORT = int(os.environ["RECORDSD_PORT"])
ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))
WATCHERS = int(os.environ.get("BENCH_WATCHERS", "100"))


def psql(*statements, capture=False):
    command = ["psql", PGURL, "-qtAX", "-v", "ON_ERROR_STOP=1"]
    for sql in statements:
        command += ["-c", sql]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


def export_recordsd(path):
    """Reads in large chunks, as `records export` would want to; removes dot-stuffing."""
    start = time.perf_counter()
    sock = socket.create_connection(("127.0.0.1", PORT))
    banner = b""
    while not banner.endswith(b"\n"):
        banner += sock.recv(1)
    sock.sendall(b"EXPORT employee\n")
    tail = b""
    with open(path, "wb") as out:
        while True:
            chunk = tail + sock.recv(1 << 20)
            end = chunk.rfind(b"\n") + 1
            complete, tail = chunk[:end], chunk[end:]
            status = complete.find(b"\n+OK exported")
            if complete.startswith(b"+OK exported"):
                break
            if status >= 0:
                complete = complete[:status + 1]
            # Each chunk starts at a line start: a stuffed first line loses its dot too.
            out.write((complete[1:] if complete.startswith(b".") else complete).replace(b"\n.", b"\n"))
            if status >= 0:
                break
    return time.perf_counter() - start


def import_recordsd(path):
    start = time.perf_counter()
    sock = socket.create_connection(("127.0.0.1", PORT))
    reader = sock.makefile("rb")
    reader.readline()
    sock.sendall(b"IMPORT employee\n")
    with open(path, "rb") as data:
        while True:
            chunk = data.read(1 << 20)
            if not chunk:
                break
            sock.sendall(chunk)  # no line of this data starts with "."
    sock.sendall(b".\n")
    status = reader.readline()
    assert status.startswith(b"+OK imported"), status
    return time.perf_counter() - start


def watch_latency(samples=200):
    selector = selectors.DefaultSelector()
    watchers = []
    for _ in range(WATCHERS):
        c = Client(PORT)
        c.send("WATCH game")
        c.sock.setblocking(False)
        selector.register(c.sock, selectors.EVENT_READ)
        watchers.append(c)
    editor = Client(PORT)
    latencies = []
    for i in range(samples):
        name = f"latency-{time.time_ns()}-{i}"
        editor.sock.sendall(f'INSERT game name="{name}"\nSAVE\n'.encode())
        editor.reply()
        _, status = editor.reply()
        committed = time.perf_counter()  # the SAVE reply comes after COMMIT returned
        assert status.startswith("+OK saved"), status
        seen, first = 0, None
        while seen < WATCHERS:
            for key, _ in selector.select(timeout=5):
                data = key.fileobj.recv(65536)
                seen += data.count(b"! game ")
                if first is None:
                    first = time.perf_counter()
        latencies.append((time.perf_counter() - committed) * 1000)
    return latencies


peak_kib = 0


def timed(action):
    """Seconds the action took; the server's peak resident memory meanwhile goes to peak_kib."""
    global peak_kib
    done = threading.Event()

    def sample():
        global peak_kib
        while not done.wait(0.05):
            peak_kib = max(peak_kib, rss_kib(PID))

    sampler = threading.Thread(target=sample)
    sampler.start()
    start = time.perf_counter()
    action()
    elapsed = time.perf_counter() - start
    done.set()
    sampler.join()
    return elapsed


def main():
    print(f"== loading {ROWS} employees", flush=True)
    psql("TRUNCATE employee, department RESTART IDENTITY CASCADE",
         "INSERT INTO employee (first_name, last_name, gender, age) SELECT 'First' || i, 'Last, \"' || i || '\"', 1 + i % 2, i % 90 "
         f"FROM generate_series(1, {ROWS}) i")
    psql("VACUUM ANALYZE employee")  # hint bits set once, not by whichever export reads first
    tmp = tempfile.mkdtemp()
    ours, theirs = os.path.join(tmp, "recordsd.csv"), os.path.join(tmp, "psql.csv")
    # Rounds alternate which side goes first; the median of each side is compared.
    exports = {"recordsd": [], "psql": []}
    for round in range(REPEAT):
        sides = [("recordsd", lambda: export_recordsd(ours)),
                 ("psql", lambda: psql(f"\\copy employee TO '{theirs}' WITH (FORMAT csv, HEADER true)"))]
        for name, action in (sides if round % 2 == 0 else sides[::-1]):
            exports[name].append(timed(action))
    imports = {"recordsd": [], "psql": []}
    for round in range(REPEAT):
        sides = [("recordsd", lambda: import_recordsd(ours)),
                 ("psql", lambda: psql(f"\\copy employee FROM '{theirs}' WITH (FORMAT csv, HEADER true)"))]
        for name, action in (sides if round % 2 == 0 else sides[::-1]):
            psql("TRUNCATE employee RESTART IDENTITY CASCADE")
            imports[name].append(timed(action))
            count = int(psql("SELECT count(*) FROM employee").strip())
            assert count == ROWS, (name, count)
    export_ours, export_psql = statistics.median(exports["recordsd"]), statistics.median(exports["psql"])
    import_ours, import_psql = statistics.median(imports["recordsd"]), statistics.median(imports["psql"])
    print(f"{ROWS} employees, CSV; PostgreSQL with fsync on; median of {REPEAT} alternating rounds; both over PostgreSQL's Unix socket")
    print(f"  EXPORT  recordsd {ROWS / export_ours:9.0f} rows/s ({export_ours:.2f} s)   psql \\copy {ROWS / export_psql:9.0f} rows/s ({export_psql:.2f} s)   ratio {export_psql / export_ours:.2f} (target >= 0.8)")
    print(f"  IMPORT  recordsd {ROWS / import_ours:9.0f} rows/s ({import_ours:.2f} s)   psql \\copy {ROWS / import_psql:9.0f} rows/s ({import_psql:.2f} s)   ratio {import_psql / import_ours:.2f} (target >= 0.8)")
    print(f"  recordsd peak resident memory during all of them: {peak_kib / 1024:.1f} MiB (the data is {os.path.getsize(ours) / 2**20:.0f} MiB)")
    latencies = watch_latency()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    print(f"WATCH with {WATCHERS} watching sessions, {len(latencies)} saves: from the SAVE's reply (after COMMIT) to the line "
          f"pushed to all {WATCHERS}: median {statistics.median(latencies):.1f} ms, p99 {p99:.1f} ms")


if __name__ == "__main__":
    main()
