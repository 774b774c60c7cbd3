"""PostgreSQL killed (pg_ctl stop -m immediate) and restarted while clients save: no unit may be
stored twice, none half, and none answered "nothing was saved" while it was. Each client keeps a
unit of a department and its employees and sends SAVE until it is answered +OK (a unit whose
SAVE failed is kept by the server, so the retry sends the same changes). Bounded: a few rounds."""
import os
import subprocess
import sys
import threading
import time

from client import Client

PGURL = os.environ["PGURL"]
ROUNDS = int(os.environ.get("FAULT_ROUNDS", "4"))
CLIENTS = int(os.environ.get("FAULT_CLIENTS", "16"))
EMPLOYEES = 4
PG_CTL = os.environ["PG_CTL"]


def psql(sql):
    return subprocess.run(["psql", PGURL, "-tAXc", sql], check=True, capture_output=True, text=True).stdout.strip()


def pg(action):
    mode = ["-m", "immediate"] if action == "stop" else []
    subprocess.run(os.environ["AS_PG"].split() + [PG_CTL, "-D", os.environ["PGDATA"], "-w"] + mode
                   + (["-l", os.environ["PGLOG"], "-o", os.environ["PG_START_OPTS"]] if action == "start" else []) + [action],
                   check=True, capture_output=True)


def worker(port, first_unit, stats, stop):
    unit = first_unit
    client = Client(port)
    while not stop.is_set():
        lines = [f'INSERT department AS #d name="unit-{unit}" number={unit % 1000000}']
        lines += [f'INSERT employee first_name="E{i}" last_name="unit-{unit}" gender=1 department=#d' for i in range(EMPLOYEES)]
        client.send_many(lines)
        said_nothing = False
        for attempt in range(200):
            _, status = client.send("SAVE")
            if status.startswith("+OK saved"):
                stats["acked"].append(unit)
                if said_nothing:
                    stats["retried_after_nothing"].append(unit)
                break
            if "nothing was saved" in status:
                said_nothing = True
            elif "cannot say yet" in status:
                stats["uncertain"] += 1
            if stop.is_set() and attempt > 40:
                break
            time.sleep(0.1)
        else:
            pass
        if not status.startswith("+OK"):
            # Given up while PostgreSQL was away: what the server said must hold.
            if said_nothing and not stop.is_set():
                pass
            client.send("ROLLBACK")
            stats["abandoned"].append((unit, said_nothing))
        unit += 1


def main():
    psql("TRUNCATE employee, department RESTART IDENTITY CASCADE")
    stats = {"acked": [], "retried_after_nothing": [], "uncertain": 0, "abandoned": []}
    stop = threading.Event()
    port = int(os.environ["RECORDSD_PORT"])
    threads = [threading.Thread(target=worker, args=(port, i * 10_000_000, stats, stop)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for round_ in range(ROUNDS):
        time.sleep(1.5 + round_ * 0.5)
        pg("stop")
        time.sleep(0.5)
        pg("start")
    time.sleep(3)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    counts = {}
    for name, n in (line.split("|") for line in psql("SELECT name, count(*) FROM department GROUP BY name").splitlines() if line):
        counts[name] = int(n)
    acked = stats["acked"]
    present = sum(1 for u in acked if counts.get(f"unit-{u}", 0) >= 1)
    duplicated = sum(1 for n in counts.values() if n > 1)
    partial = int(psql(f"SELECT count(*) FROM (SELECT d.id FROM department d LEFT JOIN employee e ON e.department_id = d.id "
                       f"GROUP BY d.id HAVING count(e.id) <> {EMPLOYEES}) p"))
    # A unit given up on after "nothing was saved" must be absent.
    lied = sum(1 for unit, said_nothing in stats["abandoned"] if said_nothing and counts.get(f"unit-{unit}", 0) > 0)
    print(f"{ROUNDS} restarts of PostgreSQL (-m immediate), {CLIENTS} clients")
    print(f"acknowledged {len(acked)}, present {present} (must be all), duplicated {duplicated} (must be 0), "
          f"partial {partial} (must be 0), answered-nothing-saved-but-committed {lied} (must be 0)")
    print(f"saved after an earlier 'nothing was saved' for the same unit: {len(stats['retried_after_nothing'])}; "
          f"'cannot say yet' answers: {stats['uncertain']}; units given up: {len(stats['abandoned'])}")
    sys.exit(1 if duplicated or partial or lied or present != len(acked) else 0)


if __name__ == "__main__":
    main()
