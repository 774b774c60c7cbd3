/// Observations counted as Prometheus's histograms count them: each bucket holds those at or
/// under its bound, the total and the sum all of them. In this, the lowest module, because the
/// pool counts its jobs' waits with it; `Metrics` renders every histogram.
public struct Histogram: Sendable {
    public private(set) var counts: [Int]
    public private(set) var total = 0
    public private(set) var sum = 0.0

    public init(_ bounds: [Double]) { counts = [Int](repeating: 0, count: bounds.count) }

    public mutating func observe(_ value: Double, _ bounds: [Double]) {
        var index = bounds.count - 1
        // From the top: most observations are small, and every bucket at or above counts.
        while index >= 0, value <= bounds[index] { counts[index] += 1; index -= 1 }
        total += 1
        sum += value
    }
}
