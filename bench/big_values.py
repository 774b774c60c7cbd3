"""1 MB bytea against 1 MB text, and PING on another session meanwhile (bench/big_values.sh).

Each round sends ROUNDS units of UNIT inserts of one kind, SAVEs each, and times what the client
waits: every INSERT's reply, and the SAVE's. The two kinds alternate round by round; a second
session PINGs every 5 ms during the bytea rounds and its latencies are reported.
"""
import base64, os, socket, statistics, threading, time

PORT = int(os.environ["RECORDSD_PORT"])
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
UNIT = int(os.environ.get("BENCH_UNIT", "8"))
SIZE = int(os.environ.get("BENCH_BYTES", str(1 << 20)))


def connect():
    sock = socket.create_connection(("127.0.0.1", PORT))
    reader = sock.makefile("rb")
    reader.readline()
    return sock, reader


def reply(reader):
    while True:
        line = reader.readline()
        if line.startswith(b"+OK") or line.startswith(b"-ERR"):
            return line


def round_of(sock, reader, line):
    """Seconds for UNIT inserts (each sent, its reply read) and their SAVE."""
    start = time.perf_counter()
    for _ in range(UNIT):
        sock.sendall(line)
        answer = reply(reader)
        assert answer.startswith(b"+OK"), answer[:200]
    sock.sendall(b"SAVE\n")
    answer = reply(reader)
    assert answer.startswith(b"+OK saved"), answer[:200]
    return time.perf_counter() - start


def main():
    photo = base64.b64encode(os.urandom(SIZE)).decode()
    text = "t" * len(photo)  # the same bytes on the wire
    lines = {
        "bytea": f'INSERT friend photo="{photo}"\n'.encode(),
        "text": f'INSERT friend status="{text}"\n'.encode(),
    }
    sock, reader = connect()
    pinger, ping_reader = connect()
    pings, stop = [], threading.Event()

    def ping():
        while not stop.is_set():
            start = time.perf_counter()
            pinger.sendall(b"PING\n")
            reply(ping_reader)
            pings.append(time.perf_counter() - start)
            time.sleep(0.005)

    times = {"bytea": [], "text": []}
    round_of(sock, reader, lines["text"])  # warm-up
    for _ in range(ROUNDS):
        for kind in ("bytea", "text"):
            thread = None
            if kind == "bytea":
                stop.clear()
                thread = threading.Thread(target=ping)
                thread.start()
            times[kind].append(round_of(sock, reader, lines[kind]))
            if thread:
                stop.set()
                thread.join()
    mib = SIZE * UNIT / (1 << 20)
    print(f"big values: {ROUNDS} alternating rounds of {UNIT} inserts of {SIZE:,} bytes each (base64 on the wire: {len(photo):,} bytes) and one SAVE")
    for kind in ("bytea", "text"):
        median = statistics.median(times[kind])
        print(f"  {kind:5}  median round {median:.3f} s  ({mib / median:.1f} MiB/s; rounds {min(times[kind]):.3f}-{max(times[kind]):.3f} s)")
    ratio = statistics.median(times["bytea"]) / statistics.median(times["text"])
    print(f"  bytea takes {ratio:.2f}x the time of text of the same length")
    pings.sort()
    if pings:
        p50 = pings[len(pings) // 2] * 1000
        p99 = pings[min(len(pings) - 1, int(len(pings) * 0.99))] * 1000
        print(f"  PING on another session during the bytea rounds: {len(pings)} pings, p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {pings[-1] * 1000:.2f} ms")


main()
