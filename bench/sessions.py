"""Sessions 1 / 10 / 100 / 1,000 / 10,000: connect time, PING throughput, SAVE throughput of
one-insert units from 8 and 64 clients against pgbench running the same single-row insert
transaction, and the server's resident memory. Writes a table and a chart to bench/results/."""
import os
import re
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time

from client import Client, rss_kib

PGURL = os.environ["PGURL"]
PORT = int(os.environ["RECORDSD_PORT"])
PID = int(os.environ["RECORDSD_PID"])
RESULTS = os.environ["RESULTS"]
SECONDS = float(os.environ.get("BENCH_SECONDS", "5"))
COUNTS = [int(n) for n in os.environ.get("BENCH_SESSIONS", "1,10,100,1000,10000").split(",")]

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def open_sessions(n):
    """n connections, each with its banner read; returns (sockets, seconds)."""
    start = time.perf_counter()
    socks, selector = [], selectors.DefaultSelector()
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", PORT))
        selector.register(s, selectors.EVENT_READ)
        socks.append(s)
    waiting = n
    while waiting:
        for key, _ in selector.select(timeout=10):
            data = key.fileobj.recv(256)
            assert data.startswith(b"+OK recordsd"), data
            selector.unregister(key.fileobj)
            waiting -= 1
    return socks, time.perf_counter() - start


def rate(clients, lines_for, check):
    """Runs `clients` threads, each pipelining lines_for(i) until the deadline; returns units per second."""
    counts = [0] * clients
    deadline = time.time() + SECONDS

    def run(i):
        c = Client(PORT)
        lines = lines_for(i)
        while time.time() < deadline:
            statuses = c.send_many(lines)
            assert check(statuses), statuses
            counts[i] += 1
        c.sock.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.time() - start)


def ping_rate():
    return 100 * rate(8, lambda i: ["PING"] * 100, lambda s: s[-1] == "+OK PONG")


def save_rate(clients):
    return rate(clients, lambda i: [f'INSERT contact name="c{i}"', "SAVE"], lambda s: s[1].startswith("+OK saved: 1 inserted"))


def pgbench_rate(clients):
    script = os.path.join(os.environ["BENCH_TMP"], "insert.sql")
    with open(script, "w") as f:
        f.write("INSERT INTO contact (name) VALUES ('pgbench');\n")
    out = subprocess.run(["pgbench", "-n", "-f", script, "-c", str(clients), "-j", "2", "-T", str(int(SECONDS)), PGURL],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"tps = ([0-9.]+)", out).group(1))


def main():
    baseline = rss_kib(PID)
    rows = []
    pg8, pg64 = pgbench_rate(8), pgbench_rate(64)
    for n in COUNTS:
        socks, connect = open_sessions(n)
        time.sleep(0.5)
        memory = rss_kib(PID)
        ping = ping_rate()
        s8, s64 = save_rate(8), save_rate(64)
        rows.append((n, connect, ping, s8, s64, memory))
        print(f"{n:6d} sessions: connect {connect:6.2f} s, PING {ping:8.0f}/s, SAVE 8 clients {s8:6.0f}/s, "
              f"64 clients {s64:6.0f}/s, resident {memory / 1024:7.1f} MiB", flush=True)
        for s in socks:
            s.close()
        time.sleep(1)
    table = ["sessions  connect_s  ping_per_s  save8_per_s  save64_per_s  pgbench8_tps  pgbench64_tps  resident_MiB  KiB_per_session"]
    for n, connect, ping, s8, s64, memory in rows:
        per = (memory - baseline) / n
        table.append(f"{n:8d}  {connect:9.2f}  {ping:10.0f}  {s8:11.0f}  {s64:12.0f}  {pg8:12.0f}  {pg64:13.0f}  {memory / 1024:12.1f}  {per:15.1f}")
    last = rows[-1]
    table.append("")
    table.append(f"SAVE at 64 clients with {last[0]} sessions open: {last[4]:.0f}/s = {last[4] / pg64:.2f} of pgbench's {pg64:.0f} tps (target >= 0.7)")
    table.append(f"SAVE at 8 clients: {last[3]:.0f}/s = {last[3] / pg8:.2f} of pgbench's {pg8:.0f} tps")
    table.append(f"resident memory with {last[0]} sessions: {last[5] / 1024:.1f} MiB (target < 1024), "
                 f"{(last[5] - baseline) / last[0]:.1f} KiB per idle session (target < 64)")
    text = "\n".join(table)
    print(text)
    with open(os.path.join(RESULTS, "sessions.txt"), "w") as f:
        f.write(text + "\n")
    chart(rows, pg8, pg64)


def chart(rows, pg8, pg64):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sessions = [r[0] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    left.plot(sessions, [r[4] for r in rows], "o-", label="recordsd SAVE, 64 clients")
    left.plot(sessions, [r[3] for r in rows], "o-", label="recordsd SAVE, 8 clients")
    left.axhline(pg64, color="gray", linestyle="--", label="pgbench insert, 64 clients")
    left.axhline(pg8, color="gray", linestyle=":", label="pgbench insert, 8 clients")
    left.set_xscale("log")
    left.set_xlabel("open sessions")
    left.set_ylabel("single-insert transactions per second")
    left.set_ylim(bottom=0)
    left.legend(fontsize=8)
    left.set_title("SAVE throughput")
    right.plot(sessions, [r[5] / 1024 for r in rows], "o-", color="tab:red")
    right.set_xscale("log")
    right.set_xlabel("open sessions")
    right.set_ylabel("recordsd resident memory (MiB)")
    right.set_ylim(bottom=0)
    right.set_title("Server memory")
    fig.suptitle(f"recordsd vs pgbench, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, PostgreSQL with fsync on", fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "sessions.png"), dpi=100)


if __name__ == "__main__":
    main()
