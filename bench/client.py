"""A minimal client of the recordsd line protocol for the benchmarks (not a test helper)."""
import socket


class Client:
    def __init__(self, port, host="127.0.0.1", tls=None):
        """`tls`: an ssl.SSLContext; the port then speaks TLS from the first byte."""
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname="localhost")
        self.file = self.sock.makefile("rb", buffering=1 << 16)
        self.banner = self.file.readline().decode()

    def send_many(self, lines):
        """Pipelines every line, then reads every reply; returns the status lines."""
        data = "".join(line + "\n" for line in lines).encode()
        self.sock.sendall(data)
        return [self.reply()[1] for _ in lines]

    def reply(self):
        lines = []
        while True:
            line = self.file.readline().decode()
            if not line:
                raise EOFError("connection closed")
            line = line.rstrip("\n")
            if line.startswith("+OK") or line.startswith("-ERR"):
                return lines, line
            if not line.startswith("!"):
                lines.append(line)

    def send(self, line):
        self.sock.sendall((line + "\n").encode())
        return self.reply()


def cpu_ticks():
    """The machine's CPU time so far, in ticks: (stolen by the host, all). On a shared virtual
    machine the host takes time from both sides of a comparison, but more from the one that
    needs more cores at once: a bench prints the share it saw."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    return fields[7], sum(fields[:8])


def stolen_share(before, after):
    """The share of CPU time the host took between two `cpu_ticks()`."""
    return (after[0] - before[0]) / max(1, after[1] - before[1])


def status_kib(pid, field):
    """A memory figure of /proc/<pid>/status in KiB: VmRSS (resident now), VmHWM (peak)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def rss_kib(pid):
    return status_kib(pid, "VmRSS")
