/// Answers by name, each worked out once and kept, with the last answer compared before the
/// map is hashed: a unit's rows come in runs (of one entity, pointing at one parent), and a
/// short name compares for less than it hashes.
struct RunMemo<Value> {
    private var answers: [String: Value] = [:]
    private var last: (name: String, value: Value)?
    /// Whether `answers` keeps what `make` said (else only the last answer is remembered,
    /// for a `make` that is itself a lookup).
    private let keeps: Bool

    /// `keeps: false` when `make` is itself a lookup: only the last answer is remembered.
    init(keeps: Bool = true) {
        self.keeps = keeps
    }

    mutating func value(_ name: String, _ make: (String) -> Value) -> Value {
        if let last, last.name == name { return last.value }
        let value: Value
        if keeps, let kept = answers[name] {
            value = kept
        } else {
            value = make(name)
            if keeps { answers[name] = value }
        }
        last = (name, value)
        return value
    }
}
