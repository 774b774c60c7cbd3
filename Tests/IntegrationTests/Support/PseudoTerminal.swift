import Foundation

/// The `records` shell under a pseudo-terminal (Python's pty drives it as a person would, with
/// pauses), typing `steps` (keys, then seconds to read; `run:CMD` runs a shell command there);
/// returns its screen and `exit N`. The child starts as a login shell starts a program: the
/// test runner's blocked signals reset.
func typedShell(port: Int, _ steps: [(String, Double)], rows: Int = 0, columns: Int = 0, pager: String? = nil) throws -> String {
    let driver = """
        import os, pty, sys, time, select, signal, json, subprocess, fcntl, termios, struct
        pid, fd = pty.fork()
        if pid == 0:
            signal.pthread_sigmask(signal.SIG_SETMASK, set())
            os.environ["NO_COLOR"] = "1"
            if sys.argv[5] != "-": os.environ["PAGER"] = sys.argv[5]
            else: os.environ.pop("PAGER", None)
            os.execv(sys.argv[1], ["records", "-p", sys.argv[2]])
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", int(sys.argv[4].split("x")[0]), int(sys.argv[4].split("x")[1]), 0, 0))
        def read(t=1.0):
            out = b""; end = time.time() + t
            while time.time() < end:
                if select.select([fd], [], [], 0.05)[0]:
                    try: out += os.read(fd, 65536)
                    except OSError: break
            return out.decode(errors="replace").replace("\\r", "")
        log = read()
        for keys, wait in json.loads(sys.argv[3]):
            if keys.startswith("run:"):
                subprocess.run(keys[4:], shell=True, stdout=subprocess.DEVNULL)
            else:
                os.write(fd, keys.encode())
            log += read(wait)
        _, status = os.waitpid(pid, 0)
        print(log)
        print("exit", os.WEXITSTATUS(status))
        """
    let steps = String(decoding: try JSONSerialization.data(withJSONObject: steps.map { [$0.0, $0.1] as [Any] }), as: UTF8.self)
    return try runProcess("/usr/bin/env", ["python3", "-c", driver, TestEnvironment.recordsBinary, String(port), steps, "\(rows)x\(columns)", pager ?? "-"]).output
}
