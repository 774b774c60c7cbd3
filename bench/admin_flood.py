"""Latency of the admin endpoints and of PING, without and with 1,000 idle admin connections."""
import os, socket, statistics, time

admin = int(os.environ["RECORDSD_ADMIN_PORT"])
client = int(os.environ["RECORDSD_PORT"])


def ask(path):
    started = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", admin), timeout=10)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:60]
    return (time.perf_counter() - started) * 1000


def pings(n):
    s = socket.create_connection(("127.0.0.1", client), timeout=10)
    f = s.makefile("rb")
    f.readline()
    out = []
    for _ in range(n):
        started = time.perf_counter()
        s.sendall(b"PING\n")
        assert f.readline().startswith(b"+OK PONG")
        out.append((time.perf_counter() - started) * 1000)
    s.close()
    return out


def summary(samples):
    ordered = sorted(samples)
    p99 = ordered[int(len(ordered) * 0.99) - 1]
    return f"p50 {statistics.median(ordered):6.2f} ms  p99 {p99:6.2f} ms  max {ordered[-1]:6.2f} ms"


def round_of(label):
    print(f"-- {label}")
    for path in ["/live", "/ready", "/metrics"]:
        print(f"  {path:9} x200  {summary([ask(path) for _ in range(200)])}")
    print(f"  PING      x2000 {summary(pings(2000))}")


print("admin listener under a flood of idle connections (bench/admin_flood.sh)")
round_of("no flood")
idle = []
for _ in range(1000):
    s = socket.create_connection(("127.0.0.1", admin), timeout=10)
    idle.append(s)
round_of("1,000 idle admin connections opened (the oldest idle ones are shed past 128)")
for s in idle:
    s.close()
