"""Clients behind HAProxy keep units of work while the replicas behind it restart.

Each client (a thread, a raw socket: what any client of the protocol sees) keeps a unit of
1-50 pending inserts, one line at a time, then SAVEs, over and over. Meanwhile the replicas are
stopped and started again one after the other (SIGTERM: sessions handed off; or SIGKILL with
--durable-units). A client that loses its connection reconnects through the balancer and
RESUMEs with the token it was given, then goes on. At the end every client saves what it holds,
and the database must hold exactly the rows each client saw acknowledged by a SAVE: none lost,
none twice.

Environment: BALANCER_PORT, REPLICA_CMD_0/1 (shell commands that start each replica),
REPLICA_PID_FILE_0/1, PGURL, CLIENTS (100), MODE (term|kill), ROUNDS (2), MEASURE_SECONDS
(when set: no restarts, 1-insert SAVEs for that long, prints the rate).
"""
import os, random, signal, socket, subprocess, sys, threading, time

PORT = int(os.environ["BALANCER_PORT"])
CLIENTS = int(os.environ.get("CLIENTS", "100"))
MODE = os.environ.get("MODE", "term")
ROUNDS = int(os.environ.get("ROUNDS", "2"))
MEASURE = float(os.environ.get("MEASURE_SECONDS", "0"))
RUN = os.environ.get("RUN", "r")


class Lost(Exception):
    pass


class Client:
    def __init__(self, number):
        self.number = number
        self.sequence = 0
        self.pending = []          # names of acknowledged pending inserts
        self.saved = set()         # names a SAVE acknowledged
        self.token = None
        self.stopped = False       # the server said it is stopping
        self.failed = []           # commands answered with an error (other than the move)
        self.moves = 0
        self.longest_pause = 0.0
        self.saves = 0
        self.history = []
        self.connect()

    def connect(self):
        deadline = time.time() + 30
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", PORT), timeout=30)
                self.file = self.sock.makefile("rb")
                banner = self.file.readline()
                if banner.startswith(b"+OK"):
                    return
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("could not connect through the balancer")
            time.sleep(0.1)

    def read_reply(self):
        lines = []
        while True:
            raw = self.file.readline()
            if not raw:
                raise Lost()
            line = raw.decode().rstrip("\n")
            if line.startswith("! "):
                words = line.split(" ")
                self.history.append(line[:40])
                if words[1] == "handoff":
                    self.token = words[2]
                elif words[1] == "shutdown":
                    self.stopped = True
                continue
            if line.startswith("+") or line.startswith("-"):
                return line, lines
            lines.append(line)

    def send(self, line):
        """The reply's status; a connection lost on the way is followed to the other replica."""
        try:
            self.sock.sendall((line + "\n").encode())
            reply = self.read_reply()
            self.history.append(f"{line[15:40]} -> {reply[0][:60]}")
            return reply
        except (Lost, OSError):
            self.history.append(f"{line[15:40]} -> lost")
            return self.move(line)

    def move(self, line):
        started = time.time()
        stopped, token = self.stopped, self.token
        try:
            self.sock.close()
        except OSError:
            pass
        if token is None:
            # Nothing was held (no pending change): a new session is all there is to it.
            if not stopped or self.pending:
                raise RuntimeError(f"client {self.number}: connection lost without a token (pending {len(self.pending)})")
            self.connect()
            self.stopped = False
            self.moves += 1
            self.longest_pause = max(self.longest_pause, time.time() - started)
            return self.send(line)
        while True:
            self.connect()
            self.stopped = False
            self.token = None
            try:
                self.sock.sendall(f"RESUME {token}\n".encode())
                status, _ = self.read_reply()
            except (Lost, OSError):
                continue
            if status.startswith("-ERR UNAVAILABLE"):
                time.sleep(0.1)
                continue
            break
        self.moves += 1
        self.history.append(f"RESUME -> {status[:90]}")
        self.longest_pause = max(self.longest_pause, time.time() - started)
        if not status.startswith("+OK resumed: "):
            raise RuntimeError(f"client {self.number}: RESUME answered {status}")
        held = int(status.split(" ")[2])
        if "the unit is saved" in status:
            # The last SAVE committed, and the state written before it is the newest the server
            # kept: what was pending is saved. A line after that SAVE (an INSERT whose reply
            # was lost with the server) did not run: it is sent again.
            self.saved.update(self.pending)
            self.pending = []
            if line == "SAVE":
                self.saves += 1
                return "+OK (saved before the move)", []
            return self.send(line)
        if line == "SAVE" and held == 0 and self.pending:
            # The SAVE committed and its emptied unit was written before the crash; its reply was lost.
            self.saved.update(self.pending)
            self.pending = []
            self.saves += 1
            return "+OK (saved before the move)", []
        if line.startswith("INSERT") and held == len(self.pending) + 1:
            # The insert ran before the crash; its reply was lost.
            return "+OK (ran before the move)", []
        if held != len(self.pending):
            out = subprocess.run(["psql", os.environ["PGURL"], "-Atc", f"SELECT pending, open, spent_at, written_at, server, state->'nextSaveMark' FROM records.handoff WHERE token_hash = sha256(convert_to('{token}', 'UTF8'))"], capture_output=True, text=True).stdout
            raise RuntimeError(f"client {self.number}: resumed {held} pending, expected {len(self.pending)} ({status}; line {line}; token {token}; row {out}; history {self.history[-6:]})")
        return self.send(line)

    def insert(self):
        self.sequence += 1
        name = f"{RUN}-{self.number}-{self.sequence}"
        status, _ = self.send(f'INSERT project name="{name}"')
        if status.startswith("+OK"):
            self.pending.append(name)
        else:
            self.failed.append(status)

    def save(self):
        status, _ = self.send("SAVE")
        if status.startswith("+OK"):
            self.saved.update(self.pending)
            self.pending = []
            self.saves += 1
        else:
            self.failed.append(status)


def run_clients(stop, clients, unit_sizes):
    def work(client):
        random_ = random.Random(client.number)
        while not stop.is_set():
            for _ in range(random_.randint(*unit_sizes)):
                client.insert()
                if stop.is_set():
                    break
            if not stop.is_set():
                client.save()
    threads = [threading.Thread(target=work, args=(c,), daemon=True) for c in clients]
    for thread in threads:
        thread.start()
    return threads


def restart(index):
    pid = int(open(os.environ[f"REPLICA_PID_FILE_{index}"]).read())
    os.kill(pid, signal.SIGKILL if MODE == "kill" else signal.SIGTERM)
    while True:
        try:
            os.kill(pid, 0)
            time.sleep(0.05)
        except ProcessLookupError:
            break
    subprocess.run(os.environ[f"REPLICA_CMD_{index}"], shell=True, check=True)


def main():
    stop = threading.Event()
    clients = [Client(n) for n in range(CLIENTS)]
    if MEASURE:
        threads = run_clients(stop, clients, (1, 1))
        started = time.time()
        time.sleep(MEASURE)
        stop.set()
        for thread in threads:
            thread.join()
        elapsed = time.time() - started
        print(f"saves_per_second {sum(c.saves for c in clients) / elapsed:.0f}")
        return
    threads = run_clients(stop, clients, (1, 50))
    time.sleep(3)
    for _ in range(ROUNDS):
        for index in (0, 1):
            restart(index)
            time.sleep(2)
    time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join()
    for client in clients:
        client.save()
    # What the database holds against what each client saw acknowledged.
    out = subprocess.run(["psql", os.environ["PGURL"], "-Atc", f"SELECT name, count(*) FROM project WHERE name LIKE '{RUN}-%' GROUP BY name"],
                         check=True, capture_output=True, text=True).stdout
    stored = {line.split("|")[0]: int(line.split("|")[1]) for line in out.splitlines() if line}
    lost_rows = sum(1 for c in clients for name in c.saved if name not in stored)
    doubled = sum(1 for count in stored.values() if count > 1)
    expected = {name for c in clients for name in c.saved}
    extra = sum(1 for name in stored if name not in expected)
    lost_units = sum(1 for c in clients if any(name not in stored for name in c.saved))
    for c in clients:
        missing = sorted(name for name in c.saved if name not in stored)
        if missing:
            at = next((i for i, h in enumerate(c.history) if missing[0] + '"' in h), len(c.history))
            print(f"  client {c.number} lost {missing[:5]}; around it {c.history[max(0, at - 3):at + 12]}", file=sys.stderr)
    print(f"mode {MODE}: {CLIENTS} clients, {ROUNDS} rounds of restarting both replicas")
    print(f"saves {sum(c.saves for c in clients)}, rows acknowledged {len(expected)}, stored {sum(stored.values())}")
    print(f"lost_units {lost_units} lost_rows {lost_rows} doubled_rows {doubled} unexpected_rows {extra}")
    print(f"moves {sum(c.moves for c in clients)} (clients that moved: {sum(1 for c in clients if c.moves)})")
    print(f"failed_commands {sum(len(c.failed) for c in clients)} {sorted(set(s for c in clients for s in c.failed))[:3]}")
    print(f"longest_pause_seconds {max(c.longest_pause for c in clients):.2f}")
    if lost_rows or doubled or extra:
        sys.exit(1)


main()
