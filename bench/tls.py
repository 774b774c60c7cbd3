"""GET throughput and memory per session, over plain TCP and over TLS, on one server."""
import os
import ssl
import subprocess
import threading
import time

from client import Client, rss_kib

PGURL = os.environ["PGURL"]
PORT = int(os.environ["RECORDSD_PORT"])
TLS_PORT = int(os.environ["TLS_PORT"])
PID = int(os.environ["RECORDSD_PID"])
CONTEXT = ssl.create_default_context(cafile=os.environ["TLS_CA"])
CLIENTS = int(os.environ.get("BENCH_CLIENTS", "8"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "8"))
SESSIONS = int(os.environ.get("BENCH_SESSIONS", "1000"))


def throughput(tls):
    done = [0] * CLIENTS
    stop = time.monotonic() + SECONDS

    def work(index):
        client = Client(TLS_PORT if tls else PORT, tls=CONTEXT if tls else None)
        batch = [f"GET employee {1 + (index * 37 + i) % 10000}" for i in range(32)]
        while time.monotonic() < stop:
            statuses = client.send_many(batch)
            assert all(s.startswith("+OK") for s in statuses), statuses[:2]
            done[index] += len(batch)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(CLIENTS)]
    started = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - started)


def memory(tls):
    before = rss_kib(PID)
    clients = [Client(TLS_PORT if tls else PORT, tls=CONTEXT if tls else None) for _ in range(SESSIONS)]
    for client in clients[:: max(1, SESSIONS // 50)]:
        assert client.send("PING")[1] == "+OK PONG"
    after = rss_kib(PID)
    for client in clients:
        client.sock.close()
    time.sleep(1)
    return (after - before) / SESSIONS


def main():
    subprocess.run(["psql", PGURL, "-qXc", "INSERT INTO employee (first_name, last_name, gender, age) "
                    "SELECT 'f' || i, 'l' || i, 1, 30 FROM generate_series(1, 10000) i"], check=True)
    plain, tls = throughput(False), throughput(True)
    print(f"GET by id, {CLIENTS} clients pipelining 32, {SECONDS:.0f} s each")
    print(f"  plain TCP     {plain:10.0f} per second")
    print(f"  TLS           {tls:10.0f} per second   ratio {tls / plain:.2f}")
    plain_kib, tls_kib = memory(False), memory(True)
    print(f"resident memory per open session ({SESSIONS} sessions, each PINGed)")
    print(f"  plain TCP     {plain_kib:8.1f} KiB")
    print(f"  TLS           {tls_kib:8.1f} KiB")
    print()
    print(f"measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores; server, PostgreSQL and the Python clients share the machine")


if __name__ == "__main__":
    main()
