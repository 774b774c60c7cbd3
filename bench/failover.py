"""Writers and readers on one recordsd while its PostgreSQL fails over, or restarts.

WRITERS threads each INSERT a game and SAVE KEY it, over and over; a SAVE answered UNAVAILABLE
is sent again with its key (answered once: saved now, or ALREADY_SAVED if it had committed).
READERS threads each send COUNT game and GET game <an id up to 1000>. Meanwhile FAULT_CMD is run
once for each word of FAULTS (`planned` or `crash`), SETTLE seconds apart; the command returns
once the database serves again (a crashed node revived). At the end the database must hold
exactly the rows whose SAVE was acknowledged.

Prints one line of `key=value` figures: saves acknowledged, rows lost and doubled, wrong
replies (any error but UNAVAILABLE, a connection lost), UNAVAILABLE answers (during the
planned faults, during the crashes), the longest any command waited, reads.

Environment: PORT, VERIFY_URL (psql URL of the primary), WRITERS (50), READERS (50), FAULTS,
FAULT_CMD, SETTLE (5), RUN.
"""
import os, random, socket, subprocess, sys, threading, time

PORT = int(os.environ["PORT"])
WRITERS = int(os.environ.get("WRITERS", "50"))
READERS = int(os.environ.get("READERS", "50"))
FAULTS = os.environ.get("FAULTS", "planned planned planned crash crash crash").split()
FAULT_CMD = os.environ["FAULT_CMD"]
SETTLE = float(os.environ.get("SETTLE", "5"))
RUN = os.environ.get("RUN", "fo") + str(random.randrange(1 << 30))

lock = threading.Lock()
stop = threading.Event()
phase = ["warm-up"]  # the fault under way: planned, crash, or between faults
stats = {"acked": [], "wrong": [], "unavailable": {}, "longest": 0.0, "longest_what": "", "reads": 0}


def note_unavailable():
    with lock:
        stats["unavailable"][phase[0]] = stats["unavailable"].get(phase[0], 0) + 1


class Conn:
    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT), timeout=120)
        self.file = self.sock.makefile("rb")
        self.file.readline()

    def send(self, line):
        started = time.time()
        self.sock.sendall((line + "\n").encode())
        while True:
            raw = self.file.readline()
            if not raw:
                raise ConnectionError("closed")
            text = raw.decode().rstrip("\n")
            if text.startswith("+") or text.startswith("-"):
                waited = time.time() - started
                with lock:
                    if waited > stats["longest"]:
                        stats["longest"] = waited
                        stats["longest_what"] = f"{line.split(' ')[0]} during {phase[0]}, answered {text[:40]!r}"
                return text


def writer(number):
    conn, index = Conn(), 0
    try:
        while not stop.is_set():
            index += 1
            name = f"{RUN}-{number}-{index}"
            status = conn.send(f'INSERT game name="{name}"')
            if not status.startswith("+OK"):
                raise RuntimeError(f"INSERT: {status}")
            while True:
                status = conn.send(f"SAVE KEY {name}")
                if status.startswith("-ERR UNAVAILABLE"):
                    note_unavailable()
                    time.sleep(0.1)
                    continue
                break
            if not (status.startswith("+OK saved") or status.startswith("-ERR ALREADY_SAVED")):
                raise RuntimeError(f"SAVE: {status}")
            with lock:
                stats["acked"].append(name)
    except Exception as error:  # a wrong reply or a lost connection ends this client
        with lock:
            stats["wrong"].append(f"writer {number}: {error}")


def reader(number):
    conn = Conn()
    try:
        while not stop.is_set():
            for line in ("COUNT game", f"GET game {random.randint(1, 1000)}"):
                status = conn.send(line)
                if status.startswith("-ERR UNAVAILABLE"):
                    note_unavailable()
                    time.sleep(0.1)
                elif status.startswith("+OK") or status.startswith("-ERR NOT_FOUND"):
                    with lock:
                        stats["reads"] += 1
                else:
                    raise RuntimeError(f"{line}: {status}")
    except Exception as error:
        with lock:
            stats["wrong"].append(f"reader {number}: {error}")


threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
threads += [threading.Thread(target=reader, args=(n,)) for n in range(READERS)]
for thread in threads:
    thread.start()
time.sleep(SETTLE)
for fault in FAULTS:
    phase[0] = fault
    subprocess.run(FAULT_CMD + " " + fault, shell=True, check=True, stdout=subprocess.DEVNULL)
    phase[0] = "between"
    time.sleep(SETTLE)
stop.set()
for thread in threads:
    thread.join()

stored = subprocess.run(["psql", os.environ["VERIFY_URL"], "-Atc", f"SELECT name FROM game WHERE name LIKE '{RUN}-%'"],
                        check=True, capture_output=True, text=True).stdout.split()
acked = set(stats["acked"])
counts = {}
for name in stored:
    counts[name] = counts.get(name, 0) + 1
lost = len(acked - set(stored))
doubled = sum(1 for n in counts.values() if n > 1)
unacked = len(set(stored) - acked)
unavailable = stats["unavailable"]
print(f"saves={len(acked)} lost={lost} doubled={doubled} unacknowledged={unacked} wrong={len(stats['wrong'])} "
      f"unavailable_planned={unavailable.get('planned', 0)} unavailable_crash={unavailable.get('crash', 0)} "
      f"unavailable_between={unavailable.get('between', 0) + unavailable.get('warm-up', 0)} "
      f"longest_wait_s={stats['longest']:.1f} reads={stats['reads']}")
print(f"  the longest wait: {stats['longest_what']}", file=sys.stderr)
for line in stats["wrong"][:5]:
    print("  " + line, file=sys.stderr)
