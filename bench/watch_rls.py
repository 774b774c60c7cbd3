"""WATCH with row-level security: 1,000 watching sessions over U users (each session signed in
as one of them), 1,000 one-insert SAVEs by the users in turn. With policies each change reaches
the sessions of its owner only (the server checks it once per distinct watching user); without
(memo_open, the same table) it reaches all. Latency: from the SAVE's reply (after COMMIT) to the
line pushed to the last session that should get it, as the user waits."""
import os
import selectors
import statistics
import time

from client import Client

PORT = int(os.environ["RECORDSD_PORT"])
PID = int(os.environ["RECORDSD_PID"])
WATCHERS = int(os.environ.get("BENCH_WATCHERS", "1000"))
CHANGES = int(os.environ.get("BENCH_CHANGES", "1000"))
USERS = [int(u) for u in os.environ.get("BENCH_USERS", "10 100").split()]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def signed_in(count, user_of, users):
    """`count` sessions, session i signed in as user_of(i): in waves of one AUTH per user (the
    sign-in throttle counts a user's attempts in flight from one address as failures)."""
    clients = []
    for wave in range(0, count, users):
        # Connected wave by wave: a session must sign in within the server's sign-in timeout.
        batch = [(i, Client(PORT)) for i in range(wave, min(count, wave + users))]
        clients += [c for _, c in batch]
        for i, c in batch:
            c.sock.sendall(f"AUTH {user_of(i)} bench-password-{user_of(i)}\n".encode())
        for _, c in batch:
            _, status = c.reply()
            assert status.startswith("+OK signed in"), status
    return clients


def run(table, users, watchers, writers, tag):
    for c in watchers:
        c.sock.setblocking(True)
        _, status = c.send(f"WATCH {table}")
        assert status.startswith("+OK watching"), status
    selector = selectors.DefaultSelector()
    owner_of = {}
    for i, c in enumerate(watchers):
        c.sock.setblocking(False)
        selector.register(c.sock, selectors.EVENT_READ, i)
        owner_of[i] = i % users
    time.sleep(0.5)  # every ledger has read what its user sees
    latencies, delivered = [], 0
    cpu_before, started = cpu_seconds(PID), time.perf_counter()
    needle = f"! {table} ".encode()
    for n in range(CHANGES):
        u = n % users
        writer = writers[u]
        writer.sock.sendall(f'INSERT {table} uid="{tag}-{n}" body="change {n}"\nSAVE\n'.encode())
        writer.reply()
        _, status = writer.reply()
        committed = time.perf_counter()
        assert status.startswith("+OK saved"), status
        expected = {i for i in range(len(watchers)) if table == "memo_open" or owner_of[i] == u}
        waiting = set(expected)
        while waiting:
            events = selector.select(timeout=10)
            assert events, f"no event within 10 s ({len(waiting)} sessions waiting)"
            for key, _ in events:
                data = key.fileobj.recv(65536)
                if needle in data:
                    assert key.data in expected, f"session {key.data} (user {owner_of[key.data]}) was told of user {u}'s record"
                    waiting.discard(key.data)
                    delivered += data.count(needle)
        latencies.append((time.perf_counter() - committed) * 1000)
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds(PID) - cpu_before
    for c in watchers:
        selector.unregister(c.sock)
        c.sock.setblocking(True)
        c.send(f"UNWATCH {table}")
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return delivered / elapsed, statistics.median(latencies), p99, cpu, delivered


def main():
    print(f"WATCH, {WATCHERS} watching sessions, {CHANGES} one-insert SAVEs, recordsd serving as an ordinary role")
    print(f"{'users':>5}  {'table':<22} {'events/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'server CPU s':>12} {'events':>8}")
    admin = Client(PORT)
    created = set()
    for users in USERS:
        for u in range(users):
            if u not in created:
                _, status = admin.send(f"USER ADD u{u} writer bench-password-u{u}")
                assert status.startswith("+OK"), status
                created.add(u)
        watchers = signed_in(WATCHERS, lambda i: f"u{i % users}", users)
        writers = signed_in(users, lambda i: f"u{i}", users)
        for table, label in (("memo", "memo (policies)"), ("memo_open", "memo_open (none)")):
            rate, p50, p99, cpu, delivered = run(table, users, watchers, writers, f"{table}-{users}")
            print(f"{users:>5}  {label:<22} {rate:>9.0f} {p50:>7.1f} {p99:>7.1f} {cpu:>12.2f} {delivered:>8}")
        for c in watchers + writers:
            c.sock.close()
        time.sleep(0.5)
    print(f"measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} cores; server, PostgreSQL and the Python clients share the machine")


main()
