"""kill -9 of recordsd during concurrent saves: every acknowledged save must be in the database
after restart, and every unit wholly there or wholly absent. Bounded: a few rounds of seconds."""
import os
import signal
import subprocess
import sys
import threading
import time

from client import Client

PGURL = os.environ["PGURL"]
ROUNDS = int(os.environ.get("FAULT_ROUNDS", "3"))
CLIENTS = int(os.environ.get("FAULT_CLIENTS", "16"))
EMPLOYEES = 4


def psql(sql):
    return subprocess.run(["psql", PGURL, "-tAXc", sql], check=True, capture_output=True, text=True).stdout.strip()


def start_server():
    proc = subprocess.Popen([os.environ["RECORDSD_BIN"], "serve", "--listen", "127.0.0.1:0", "--database", PGURL,
                             "--migrations", os.environ["MIGRATIONS"], "--log-level", "warning", "--pool-size", "8"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    return proc, int(line.rsplit(":", 1)[1])


def worker(port, first_unit, acked, stop):
    unit = first_unit
    try:
        client = Client(port)
        while not stop.is_set():
            lines = [f'INSERT department AS #d name="unit-{unit}" number={unit}']
            lines += [f'INSERT employee first_name="E{i}" last_name="unit-{unit}" gender=1 department=#d' for i in range(EMPLOYEES)]
            lines.append("SAVE")
            statuses = client.send_many(lines)
            if statuses[-1].startswith("+OK saved"):
                acked.append(unit)
            unit += 1
    except (OSError, EOFError):
        pass  # the server was killed


def main():
    total_acked = total_missing = total_partial = total_unacked_committed = 0
    psql("TRUNCATE employee, department RESTART IDENTITY CASCADE")
    for round_ in range(ROUNDS):
        proc, port = start_server()
        acked, stop = [], threading.Event()
        threads = [threading.Thread(target=worker, args=(port, (round_ * CLIENTS + i) * 1_000_000, acked, stop)) for i in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(1.5 + round_ * 0.7)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        stop.set()
        for t in threads:
            t.join(timeout=10)
        # Restart, as an operator would, then look at what PostgreSQL holds.
        proc, port = start_server()
        names = set(psql("SELECT name FROM department").split())
        found = sum(1 for u in acked if f"unit-{u}" in names)
        partial = int(psql(f"SELECT count(*) FROM (SELECT d.id FROM department d LEFT JOIN employee e ON e.department_id = d.id "
                           f"GROUP BY d.id HAVING count(e.id) <> {EMPLOYEES}) p"))
        orphans = int(psql("SELECT count(*) FROM employee WHERE department_id IS NULL"))
        committed_units = len(names)
        unacked = committed_units - total_acked - found - total_unacked_committed
        print(f"round {round_ + 1}: {len(acked)} saves acknowledged, {found} of them found after restart, "
              f"{len(acked) - found} missing, {partial + orphans} partial units, "
              f"{max(unacked, 0)} committed but not acknowledged (in flight at the kill)")
        total_acked += len(acked)
        total_missing += len(acked) - found
        total_partial = partial + orphans
        total_unacked_committed += max(unacked, 0)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait()
    print(f"total: {total_acked} acknowledged saves, {total_missing} missing (must be 0), {total_partial} partial units (must be 0)")
    sys.exit(1 if total_missing or total_partial else 0)


if __name__ == "__main__":
    main()
