#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// The process family every Prometheus client exports (CPU seconds, resident and virtual
/// memory, open and allowed file descriptors, start time), read from /proc when scraped.
enum ProcessMetrics {
    static func render() -> String {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        var out = ""
        func sample(_ name: String, _ type: String, _ help: String, _ value: Double?) {
            guard let value else { return }
            let text = value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(text)\n"
        }
        // /proc/self/stat: fields after the command's closing parenthesis; utime, stime are
        // the 14th and 15th fields, starttime the 22nd, vsize the 23rd.
        let stat = (try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8)) ?? ""
        let fields = stat.split(separator: ")", maxSplits: 1, omittingEmptySubsequences: false).last?.split(separator: " ").map(String.init) ?? []
        func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
        if let user = field(14), let system = field(15) {
            sample("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", (user + system) / ticks)
        }
        let statm = ((try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? "").split(separator: " ")
        sample("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", statm.count > 1 ? Double(statm[1]).map { $0 * page } : nil)
        sample("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", field(23))
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count).map(Double.init)
        sample("process_open_fds", "gauge", "Number of open file descriptors.", open)
        var limit = rlimit()
        sample("process_max_fds", "gauge", "Maximum number of open file descriptors.",
               getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Double(limit.rlim_cur) : nil)
        let boot = ((try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? "").split(separator: "\n")
            .first { $0.hasPrefix("btime ") }.flatMap { Double($0.dropFirst(6)) }
        if let boot, let start = field(22) {
            sample("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", boot + start / ticks)
        }
        return out
    }
}
