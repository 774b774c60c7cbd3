"""Resident memory per idle session: a recordsd BINARY on DATABASE_URL, its VmRSS before and after
N connections that read the banner and stay idle (the fd limit must allow N; 20,000 here).

    python3 bench/idle_memory.py .build/release/recordsd 10000
"""
import os, re, resource, socket, subprocess, sys, time

binary, count = sys.argv[1], int(sys.argv[2])
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
limit = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
server = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--database", os.environ["DATABASE_URL"],
                           "--migrations", os.path.join(root, "migrations"), "--max-sessions", str(count + 100),
                           "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
port = None
for line in server.stdout:
    found = re.search(r"listening on .*:(\d+)$", line.strip())
    if found:
        port = int(found.group(1))
        break

def resident_kib():
    for line in open(f"/proc/{server.pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1])

time.sleep(1)
before = resident_kib()
sockets = []
for _ in range(count):
    s = socket.create_connection(("127.0.0.1", port))
    s.recv(200)
    sockets.append(s)
time.sleep(2)
after = resident_kib()
print(f"{binary}: {before / 1024:.1f} MiB, with {count} idle sessions {after / 1024:.1f} MiB, {(after - before) / count:.2f} KiB a session")
for s in sockets:
    s.close()
server.terminate()
server.wait()
