"""GET by id and FIND streaming, side by side with pgbench -S and COPY TO STDOUT."""
import multiprocessing
import os
import random
import re
import socket
import subprocess
import time
import urllib.request

from client import Client, cpu_ticks, status_kib, stolen_share

PGURL = os.environ["PGURL"]
PORT = int(os.environ["RECORDSD_PORT"])
PID = int(os.environ["RECORDSD_PID"])
ADMIN_PORT = int(os.environ.get("RECORDSD_ADMIN_PORT") or 0)
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "8"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "10"))
ROWS = int(os.environ.get("BENCH_ROWS", "1000000"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "9"))  # a median of 9 rounds: single rounds of FIND go from 0.66 to 1.44 of COPY
ACCOUNTS = 100_000  # pgbench scale 1


def psql(*statements):
    command = ["psql", PGURL, "-qX", "-v", "ON_ERROR_STOP=1"]
    for sql in statements:
        command += ["-c", sql]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def get_worker(seed, deadline, depth, results):
    client = Client(PORT)
    rng = random.Random(seed)
    done = 0
    while time.time() < deadline:
        lines = [f"GET employee {rng.randint(1, ACCOUNTS)}" for _ in range(depth)]
        statuses = client.send_many(lines)
        assert all(s.startswith("+OK 1 record") for s in statuses), statuses[:2]
        done += depth
    results.put(done)


def recordsd_gets(depth=32):
    results = multiprocessing.Queue()
    start = time.time()
    deadline = start + SECONDS
    workers = [multiprocessing.Process(target=get_worker, args=(i, deadline, depth, results)) for i in range(CLIENTS)]
    for w in workers:
        w.start()
    total = sum(results.get() for _ in workers)
    for w in workers:
        w.join()
    return total / (time.time() - start)


def loadgen_gets(depth=32):
    """GETs per second from the C load generator (bench/loadgen.c, pgbench's shape: 2 threads,
    epoll): each client pipelines `depth` GETs of ids 10 to 329 (its number is the last digit)."""
    lines = [f"GET employee {j + 1}%d" for j in range(depth)]
    out = subprocess.run([os.path.join(os.environ["BENCH_TMP"], "loadgen"), "-p", str(PORT), "-c", str(CLIENTS), "-j", "2",
                          "-T", str(int(SECONDS)), "-e", "+OK 1 record", *lines], check=True, capture_output=True, text=True).stdout
    return float(out.split()[2]) * depth


def pgbench_select(mode="simple"):
    out = subprocess.run(["pgbench", "-n", "-S", "-M", mode, "-c", str(CLIENTS), "-j", str(CLIENTS), "-T", str(int(SECONDS)), PGURL],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"tps = ([0-9.]+)", out).group(1))


def recordsd_find():
    sock = socket.create_connection(("127.0.0.1", PORT))
    sock.recv(1024)  # banner
    # Read as psql reads COPY: into one buffer, each byte looked at once (a new bytes object a
    # read, joined to the last one's tail, copied every megabyte twice more).
    buffer = bytearray(1 << 20)
    view = memoryview(buffer)
    start = time.perf_counter()
    sock.sendall(b"FIND employee\n")
    rows, tail = 0, b""
    while True:
        read = sock.recv_into(view)
        if not read:
            raise EOFError
        rows += buffer.count(b"\n", 0, read)
        tail = (tail + bytes(view[max(0, read - 200):read]))[-200:]
        if b"\n+OK" in tail or tail.startswith(b"+OK"):
            break
    elapsed = time.perf_counter() - start
    return (rows - 1) / elapsed, elapsed


def split_reads():
    """FINDs read in two halves so far (the server's /metrics); None without an admin port or
    from a build that does not count them (BENCH_RECORDSD)."""
    if not ADMIN_PORT:
        return None
    with urllib.request.urlopen(f"http://127.0.0.1:{ADMIN_PORT}/metrics", timeout=10) as reply:
        found = re.search(r'^recordsd_split_reads_total\{outcome="two_halves"\} (\d+)$', reply.read().decode(), re.M)
    return int(found.group(1)) if found else None


def copy_out():
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        subprocess.run(["psql", PGURL, "-qXc", "COPY (SELECT * FROM employee) TO STDOUT"], check=True, stdout=sink)
    elapsed = time.perf_counter() - start
    return ROWS / elapsed, elapsed


def main():
    print(f"== loading {ACCOUNTS} employees and pgbench scale 1", flush=True)
    subprocess.run(["pgbench", "-i", "-q", "-s", "1", PGURL], check=True, capture_output=True)
    psql("TRUNCATE employee, department RESTART IDENTITY CASCADE",
         "INSERT INTO employee (first_name, last_name, gender, age) SELECT 'First' || i, 'Last' || i, 1 + i % 2, i % 90 "
         f"FROM generate_series(1, {ACCOUNTS}) i", "VACUUM ANALYZE employee")
    Client(PORT).send("PING")
    # Rounds alternate, so both sides see the same machine; medians are compared. Both
    # clients are C (pgbench, bench/loadgen.c); the Python one is shown beside, once.
    gets_rounds = max(3, ROUNDS // 3)
    simple, prepared, rec = [], [], []
    for _ in range(gets_rounds):
        simple.append(pgbench_select())
        prepared.append(pgbench_select("prepared"))
        rec.append(loadgen_gets())
    python_rec = recordsd_gets()
    med = lambda values: sorted(values)[len(values) // 2]
    print(f"GET by id, {CLIENTS} clients, {SECONDS:.0f} s a run, median of {gets_rounds} alternating rounds (recordsd: 32 pipelined requests per client)")
    print(f"  pgbench -S (simple queries)   {med(simple):10.0f} per second")
    print(f"  pgbench -S -M prepared        {med(prepared):10.0f} per second")
    print(f"  recordsd GET (C client)       {med(rec):10.0f} per second   ratio {med(rec) / med(prepared):.2f} to prepared (target >= 1.0), {med(rec) / med(simple):.2f} to simple")
    print("  each round's ratio to prepared: " + ", ".join(f"{r / p:.2f}" for r, p in zip(rec, prepared)))
    print(f"  recordsd GET (Python clients) {python_rec:10.0f} per second (the clients share the 2 cores: what a Python user sees)")

    print(f"== loading {ROWS} employees", flush=True)
    psql("TRUNCATE employee RESTART IDENTITY CASCADE",
         "INSERT INTO employee (first_name, last_name, gender, age) SELECT 'First' || i, 'Last' || i, 1 + i % 2, i % 90 "
         f"FROM generate_series(1, {ROWS}) i", "VACUUM ANALYZE employee",
         # The load's dirty pages written now, not by the checkpointer during the rounds.
         "CHECKPOINT")
    # Rounds alternate, so both sides see the same machine; the median of each is compared.
    before = status_kib(PID, "VmHWM")
    copies, finds, halved = [], [], []
    ticks = cpu_ticks()
    for _ in range(ROUNDS):
        copies.append(copy_out())
        split_before = split_reads()
        finds.append(recordsd_find())
        halved.append(split_before is None or split_reads() > split_before)
    stolen = stolen_share(ticks, cpu_ticks())
    after = status_kib(PID, "VmHWM")
    copy_rate, copy_time = sorted(copies)[len(copies) // 2]
    find_rate, find_time = sorted(finds)[len(finds) // 2]
    print(f"FIND streaming {ROWS} rows (one JSON object a line), median of {ROUNDS} alternating rounds")
    print(f"  psql COPY (SELECT ...) TO STDOUT  {copy_rate:10.0f} rows/s ({copy_time:.2f} s)")
    print(f"  recordsd FIND                     {find_rate:10.0f} rows/s ({find_time:.2f} s)   ratio {find_rate / copy_rate:.2f} (target >= 0.9)")
    print("  each round's ratio: " + ", ".join(f"{f[0] / c[0]:.2f}" + ("" if split else " (whole)") for c, f, split in zip(copies, finds, halved)))
    if split_reads() is not None:
        print(f"  read in two halves (SplitRead): {sum(halved)} of {ROUNDS} FINDs; (whole): read on one connection")
    print(f"  recordsd peak resident memory: {after / 1024:.1f} MiB after, {before / 1024:.1f} MiB before the FINDs")
    print(f"  CPU time the virtual machine's host took (steal) during these rounds: {100 * stolen:.0f}%")

if __name__ == "__main__":
    main()
